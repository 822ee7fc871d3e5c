import Synchronization

/// One result that any number of tasks wait for, each until its own deadline or its
/// cancellation: the reply of a service call that duplicates of its command wait for, or the
/// resolution of a service's host that the calls made meanwhile wait for. A waiter that gives
/// up is gone from the list at once; only its deadline's sleeping task stays, until then.
public final class SharedResult<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        var next = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The result, or nil when it was not there by `deadline` or the caller was cancelled.
    public func value(until deadline: ContinuousClock.Instant) async -> Value? {
        let id = state.withLock { state -> Int in
            state.next += 1
            return state.next
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let known = state.withLock { state -> Value? in
                    if let value = state.value { return value }
                    state.waiters[id] = continuation
                    return nil
                }
                if let known { return continuation.resume(returning: known) }
                // Cancelled before the waiter was in the list: the handler found nothing to end.
                if Task.isCancelled { return giveUp(id) }
                Task { [weak self] in
                    try? await Task.sleep(until: deadline)
                    self?.giveUp(id)
                }
            }
        } onCancel: {
            giveUp(id)
        }
    }

    /// Ends every wait with `value`, and answers later waits with it at once. Only the first
    /// result counts.
    public func finish(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    private func giveUp(_ id: Int) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
    }
}
