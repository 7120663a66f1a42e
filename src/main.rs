fn main() {
    // Everything, the runtime included, is in the library (src/cli/entry.rs says why).
    syncfleet::cli::entry::main()
}
