import ArgumentParser
import BatonServer


struct Baton: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "baton",
        abstract: "Server-driven flows for native apps.",
        discussion: "With no DATABASE_URL, commands that need a database start a private PostgreSQL cluster under .baton/.",
        version: BatonVersion.current,
        subcommands: [
            ServeCommand.self, MigrateCommand.self, SeedCommand.self, FlowsCommand.self, LinksCommand.self, ClientCommand.self,
            TokenCommand.self, ReportCommand.self,
        ],
        defaultSubcommand: ServeCommand.self
    )
}
