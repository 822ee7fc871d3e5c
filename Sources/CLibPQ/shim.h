#ifndef BATON_CLIBPQ_SHIM_H
#define BATON_CLIBPQ_SHIM_H
// The one place Baton includes libpq. pkg-config supplies the include path
// (Debian: /usr/include/postgresql, Homebrew: $(brew --prefix libpq)/include).
#include <libpq-fe.h>
#endif
