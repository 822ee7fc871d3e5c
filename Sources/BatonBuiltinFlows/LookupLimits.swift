import BatonFlows
import BatonRuntime
import Foundation
import Synchronization

/// Sliding-window limits on a kind of call, per subject and per client address, kept in
/// memory (each replica counts its own traffic: with N replicas behind a balancer a client gets
/// at most N times the quota, which still stops enumeration).
final class LookupLimits: Sendable {
    let perSubject: Int
    let perAddress: Int
    /// Window length, seconds.
    let window: Int
    /// The times of the most recent calls, per key (at most the quota of them).
    private let recent = Mutex<[String: [Double]]>([:])

    init(perSubject: Int, perAddress: Int, window: Int) {
        self.perSubject = perSubject
        self.perAddress = perAddress
        self.window = window
    }

    /// Counts one call, or throws 429 when the subject or the address has used its quota in the
    /// last `window` seconds.
    func admit(_ call: FlowInvocation, now: Date = Date()) throws {
        let time = now.timeIntervalSince1970
        let horizon = time - Double(window)
        var keys = [("device-lookups", "s:" + call.subject.description, perSubject)]
        if let address = call.call.clientAddress { keys.append(("address-lookups", "a:" + address, perAddress)) }
        let refusal: (name: String, quota: Int, retryAfter: Int)? = recent.withLock { recent in
            if recent.count > 50_000 { recent = recent.filter { ($0.value.last ?? 0) > horizon } }
            for (name, key, quota) in keys {
                let times = recent[key, default: []].filter { $0 > horizon }
                recent[key] = times
                if times.count >= quota {
                    return (name, quota, max(1, Int((times[0] + Double(window) - time).rounded(.up))))
                }
            }
            for (_, key, quota) in keys { recent[key, default: []] = Array((recent[key, default: []] + [time]).suffix(quota)) }
            return nil
        }
        if let refusal {
            throw FlowCallError.rateLimited(
                "Too many parcel labels looked up; try again in \(refusal.retryAfter) seconds.", retryAfter: refusal.retryAfter,
                limit: (refusal.name, refusal.quota, window))
        }
    }
}
