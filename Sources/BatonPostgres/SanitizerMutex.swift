#if BATON_TSAN
// ThreadSanitizer builds only (`scripts/sanitize.sh thread`, which defines BATON_TSAN).
//
// Synchronization's `Mutex` on Linux is a priority-inheriting futex: when it is contended, the
// kernel hands the lock from the unlocking thread to a waiter, and ThreadSanitizer, which sees
// only the atomics and the calls it intercepts, sees no ordering between them. Every access
// under a contended `Mutex` then reads as a data race (README, "Under sanitizers"). So in
// these builds every module that uses `Mutex` has this file (the others link to this one), and
// its `Mutex` is a pthread mutex, whose calls ThreadSanitizer knows: declared in the module, it
// shadows the standard library's, with the surface Baton uses. Never in any other build.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct Mutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    private final class Storage {
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        var value: Value
        init(_ value: consuming Value) {
            self.value = value
            pthread_mutex_init(lock, nil)
        }
        deinit {
            pthread_mutex_destroy(lock)
            lock.deallocate()
        }
    }
    private let storage: Storage

    init(_ initialValue: consuming Value) { storage = Storage(initialValue) }

    borrowing func withLock<Result: ~Copyable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(storage.lock)
        defer { pthread_mutex_unlock(storage.lock) }
        return try body(&storage.value)
    }
}
#endif
