//! The benchmark harness (being written).
use sarena_benches::node::{Bins, Contender, Node, Pod};
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bins = Bins::locate()?;
    for (i, c) in Contender::ALL.into_iter().enumerate() {
        let node = Node::start(c, i as u8, &bins)?;
        let pod = Pod::new("smoke")?;
        let a = node.add(&pod)?;
        println!(
            "{c:?} add {:?} ok={} ip={:?} rss={} {}",
            a.elapsed,
            a.ok(),
            a.ip,
            a.max_rss_kib,
            if a.ok() {
                String::new()
            } else {
                a.error_text()
            }
        );
        let k = node.check(&pod)?;
        println!(
            "  check {:?} ok={} {}",
            k.elapsed,
            k.ok(),
            if k.ok() {
                String::new()
            } else {
                k.error_text()
            }
        );
        if c.supports_status() {
            let s = node.status()?;
            println!("  status {:?} ok={} {}", s.elapsed, s.ok(), s.stdout);
        }
        println!(
            "  usage {:?} rss {:?}",
            node.ipam_usage()?,
            node.daemon_rss_kib()?
        );
        let d = node.del(&pod)?;
        println!(
            "  del {:?} ok={} {}",
            d.elapsed,
            d.ok(),
            if d.ok() {
                String::new()
            } else {
                d.error_text()
            }
        );
        println!("  usage {:?}", node.ipam_usage()?);
    }
    Ok(())
}
