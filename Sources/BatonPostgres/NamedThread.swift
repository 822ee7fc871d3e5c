import Foundation

#if canImport(Darwin)
import Darwin
#endif

/// Starts a thread that runs `body` under `name`, the name `top -H`, `perf` and
/// `/proc/<pid>/task/*/comm` show. Foundation's `Thread.name` does not reach the kernel on
/// Linux when set before `start()` (the thread kept the name of whichever thread created it,
/// an event loop's `NIO-SGLTN-1-#1`, so the database loops looked like HTTP loops in a
/// profile), and set from the new thread it races with `start()` itself. So the thread names
/// itself through the kernel: on Linux by writing `/proc/thread-self/comm` (glibc's
/// `pthread_setname_np` is not visible to Swift), which keeps at most 15 bytes.
package func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        nameCurrentThread(name)
        body()
    }
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}

private func nameCurrentThread(_ name: String) {
    #if os(Linux)
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    #elseif canImport(Darwin)
    _ = pthread_setname_np(name)
    #endif
}
