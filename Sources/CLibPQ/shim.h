#ifndef BATON_CLIBPQ_SHIM_H
#define BATON_CLIBPQ_SHIM_H
// The one place Baton includes libpq. pkg-config supplies the include path
// (Debian: /usr/include/postgresql, Homebrew: $(brew --prefix libpq)/include).
#include <libpq-fe.h>
#ifdef __linux__
// glibc declares dup3 only under _GNU_SOURCE, which Swift's Glibc module is not built with. The
// database relay needs it to point libpq's descriptor elsewhere close-on-exec in one step.
extern int dup3(int oldfd, int newfd, int flags);
#endif
#endif
