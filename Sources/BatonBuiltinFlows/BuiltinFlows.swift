import BatonRuntime

/// The flows Baton ships with — favouriting, playlist editing, Scan & Go — registered the way
/// any application registers its own effects, guards and loaders.
public enum BuiltinFlows {
    /// Registers every built-in effect, guard and loader.
    public static func register(into registry: inout FlowRegistry) {
        Playlists.register(into: &registry)
        Favourites.register(into: &registry)
        ScanAndGo.register(into: &registry)
        Account.register(into: &registry)
    }
}
