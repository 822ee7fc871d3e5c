import Dispatch
import Foundation
import ArgumentParser
import BatonExecutor

// Swift concurrency runs on NIO's event loops instead of its own thread pool. Request
// handlers then execute on the thread that owns the connection's socket, which removes two
// thread hops from every request (event loop → concurrency pool → event loop). Nothing in
// Baton blocks on these threads: libpq runs on the database pool's own threads. The jobs run
// as the generic executor, so a task's hops between nonisolated functions stay in place
// (EventLoopGlobalExecutor, with NIO's own take-over as its fallback).
_ = EventLoopGlobalExecutor.mode

Task {
    await Baton.main()
    exit(0)
}
dispatchMain()
