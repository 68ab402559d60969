fn main() {
    eprintln!("wmrender-node: not built yet");
    std::process::exit(2);
}
