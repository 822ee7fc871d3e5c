import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs Swift concurrency's global jobs on NIO's event loops, *as the generic executor*.
///
/// NIO's own take-over (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`)
/// runs each job with the event loop as its serial executor. A task's every hop to the generic
/// executor — which the compiler emits around calls in nonisolated async code: Hummingbird's
/// middleware chain, its response writer, `withTaskCancellationHandler` — then finds itself on
/// "another" executor and is enqueued on the loop again instead of continuing in place: about
/// 78 such hops per request, 18 % of Baton's CPU on `GET /healthz` (`perf`; docs/benchmarks.md).
/// Run as the generic executor, those hops cost a comparison; a job still runs on the loop
/// that enqueued it (or any loop of the group, from another thread), so a request's handler
/// stays on the thread that owns its socket.
///
/// Like NIO's, it sets the runtime's global-enqueue hook, which is not a public API. Reading
/// ``mode`` installs it, the first time; a program's `main` does that first thing, before any
/// task exists (so the hook is written without a race). Where it cannot be (the hook is taken,
/// or the executor's layout is not the one expected) NIO's take-over is installed instead, and
/// if that fails too the runtime's own pool runs the jobs. `baton serve` logs which one runs.
public enum EventLoopGlobalExecutor {
    public enum Mode: String, Sendable {
        case generic = "event loops as the generic executor"
        case nio = "NIO's event loops"
        case runtime = "the runtime's own pool"
    }

    /// Where Swift concurrency's jobs run (installing it on first use).
    public static let mode: Mode =
        if install() {
            .generic
        } else if NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() {
            .nio
        } else {
            .runtime
        }

    /// `swift_task_enqueueGlobal_hook`'s type: the job, and the runtime's own enqueue.
    private typealias EnqueueHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// The generic executor: the runtime's `SerialExecutorRef::generic()`, a null identity and
    /// no implementation word. `UnownedSerialExecutor` is `@frozen` around exactly those two
    /// words, and the standard library has no public spelling of it. (Not an `Optional`: a
    /// null identity is what an optional executor uses for `nil`.)
    private static let layoutHolds = MemoryLayout<UnownedSerialExecutor>.size == 2 * MemoryLayout<UInt>.size
    private static let generic = unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)

    private static func install() -> Bool {
        guard layoutHolds,
            let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook")
        else { return false }
        let slot = symbol.assumingMemoryBound(to: EnqueueHook?.self)
        guard slot.pointee == nil else { return false }
        slot.pointee = { job, _ in
            // `any()` is the calling thread's loop when it is one of the group's.
            MultiThreadedEventLoopGroup.singleton.any().execute {
                job.runSynchronously(on: EventLoopGlobalExecutor.generic)
            }
        }
        return true
    }
}
