import Foundation

/// Starts a thread that runs `body` under `name`, the name `top -H`, `perf` and
/// `/proc/<pid>/task/*/comm` show. Foundation's `Thread.name`, set before `start()`, does not
/// reach the kernel on Linux: the thread kept the name of whichever thread created it (an
/// event loop's, `NIO-SGLTN-1-#1`), so the database loops were indistinguishable from the HTTP
/// loops in a profile. Set from the thread itself, it does. Linux takes names of up to 15 bytes.
func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        Thread.current.name = name
        body()
    }
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}
