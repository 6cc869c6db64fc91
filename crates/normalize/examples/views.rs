//! Prints the views and transforms of one input: `cargo run -p rampart-normalize --example views -- TEXT`.
fn main() {
    let text = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let n = rampart_normalize::Normalizer::default().normalize(&text);
    for v in &n.views {
        println!("{:<15} {:?} {:?}", v.kind.name(), v.decode_chain, v.text);
    }
    for t in &n.transforms {
        println!("transform {:?}", t);
    }
}
