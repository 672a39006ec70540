fn main() -> std::process::ExitCode {
    labpool::main()
}
