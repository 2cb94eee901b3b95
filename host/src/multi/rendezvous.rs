//! Handing rank 0's NCCL id to the other processes of a run, with a deadline: over TCP (rank
//! 0 listens, the others connect; the same path spans machines) or through a file every
//! process can read (one host, or a shared file system).
//!
//! Every process states its rank and the world size it was started with; a mismatch, a rank
//! out of range or a rank that never arrives is an error on every process that can see it,
//! within the deadline.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Bytes of an NCCL unique id.
pub const ID_BYTES: usize = 128;

/// Where the processes of a run meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// `tcp://HOST:PORT` (or `HOST:PORT`): rank 0 listens there.
    Tcp(String),
    /// `file://PATH` (or `file:PATH`): rank 0 writes the id there, the others read it; the
    /// file must not exist when the run starts, and rank 0 removes it once all have joined.
    File(PathBuf),
}

impl FromStr for Rendezvous {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if let Some(p) = s
            .strip_prefix("file://")
            .or_else(|| s.strip_prefix("file:"))
        {
            if p.is_empty() {
                return Err(Error::arg("rendezvous", "file: needs a path"));
            }
            return Ok(Rendezvous::File(PathBuf::from(p)));
        }
        let addr = s.strip_prefix("tcp://").unwrap_or(s);
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Rendezvous::Tcp(addr.to_string()))
            }
            _ => Err(Error::arg(
                "rendezvous",
                format!("`{s}` is neither tcp://HOST:PORT nor file://PATH"),
            )),
        }
    }
}

impl std::fmt::Display for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rendezvous::Tcp(a) => write!(f, "tcp://{a}"),
            Rendezvous::File(p) => write!(f, "file://{}", p.display()),
        }
    }
}

/// Checks a rank against a world size, naming the argument at fault.
pub fn check_rank(rank: usize, world: usize) -> Result<()> {
    if !(1..=4096).contains(&world) {
        return Err(Error::arg(
            "world_size",
            format!("must be in 1..=4096, got {world}"),
        ));
    }
    if rank >= world {
        return Err(Error::arg(
            "rank",
            format!("must be in 0..{world} (the world size), got {rank}"),
        ));
    }
    Ok(())
}

/// A status byte rank 0 sends before the id: the id follows, or the peer was refused.
const ACCEPTED: u8 = 1;
const WRONG_WORLD: u8 = 2;
const DUPLICATE: u8 = 3;
/// Sent to the ranks already accepted when rank 0 gives up because of another one.
const GAVE_UP: u8 = 4;

impl Rendezvous {
    /// Exchanges the id: rank 0 gives `id` (from `make_id`, called only on rank 0) to every
    /// other rank and returns it; the others return the id they received. Fails on every
    /// process that sees a mismatch, and when `deadline` passes first.
    pub fn exchange(
        &self,
        rank: usize,
        world: usize,
        timeout: Duration,
        make_id: impl FnOnce() -> Result<[u8; ID_BYTES]>,
    ) -> Result<[u8; ID_BYTES]> {
        check_rank(rank, world)?;
        let deadline = Instant::now() + timeout;
        match (self, rank) {
            (_, 0) if world == 1 => make_id(),
            (Rendezvous::Tcp(a), 0) => serve(a, world, deadline, make_id()?),
            (Rendezvous::Tcp(a), _) => join(a, rank, world, deadline, self),
            (Rendezvous::File(p), 0) => publish(p, world, make_id()?),
            (Rendezvous::File(p), _) => read_file(p, world, deadline, self),
        }
    }

    /// Called by rank 0 once every rank has joined: a file rendezvous removes its file.
    pub fn finish(&self, rank: usize) {
        if let (Rendezvous::File(p), 0) = (self, rank) {
            let _ = std::fs::remove_file(p);
        }
    }

    fn fail(&self, reason: impl Into<String>) -> Error {
        Error::Rendezvous {
            address: self.to_string(),
            reason: reason.into(),
        }
    }
}

fn timed_out(r: &Rendezvous, what: &str) -> Error {
    r.fail(format!(
        "{what} before the deadline (is every rank started, with the same address and world size?)"
    ))
}

/// Rank 0 over TCP: accepts `world - 1` peers, checks each one's world size and rank, then
/// sends every one the id.
fn serve(
    addr: &str,
    world: usize,
    deadline: Instant,
    id: [u8; ID_BYTES],
) -> Result<[u8; ID_BYTES]> {
    let r = Rendezvous::Tcp(addr.to_string());
    let listener =
        TcpListener::bind(addr).map_err(|e| r.fail(format!("rank 0 cannot listen: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| r.fail(e.to_string()))?;
    let mut peers: Vec<(usize, TcpStream)> = Vec::new();
    while peers.len() + 1 < world {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| r.fail(e.to_string()))?;
                s.set_read_timeout(Some(Duration::from_secs(5)))
                    .map_err(|e| r.fail(e.to_string()))?;
                let mut hello = [0u8; 16];
                if s.read_exact(&mut hello).is_err() {
                    continue;
                }
                let their_world =
                    u64::from_le_bytes(hello[..8].try_into().expect("8 bytes")) as usize;
                let their_rank =
                    u64::from_le_bytes(hello[8..].try_into().expect("8 bytes")) as usize;
                let refusal = if their_world != world {
                    Some((WRONG_WORLD, format!(
                        "rank {their_rank} was started with world size {their_world}, rank 0 with {world}"
                    )))
                } else if their_rank == 0
                    || their_rank >= world
                    || peers.iter().any(|(k, _)| *k == their_rank)
                {
                    Some((
                        DUPLICATE,
                        format!("rank {their_rank} joined twice or is out of range 1..{world}"),
                    ))
                } else {
                    None
                };
                if let Some((status, reason)) = refusal {
                    let _ = s.write_all(&[status]);
                    for (_, p) in &mut peers {
                        let _ = p.write_all(&[GAVE_UP]);
                    }
                    return Err(r.fail(reason));
                }
                peers.push((their_rank, s));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let mut missing: Vec<usize> = (1..world)
                        .filter(|k| !peers.iter().any(|(j, _)| j == k))
                        .collect();
                    missing.truncate(8);
                    return Err(timed_out(&r, &format!("ranks {missing:?} did not join")));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(r.fail(format!("accept: {e}"))),
        }
    }
    for (_, s) in &mut peers {
        let mut msg = vec![ACCEPTED];
        msg.extend_from_slice(&id);
        s.write_all(&msg)
            .map_err(|e| r.fail(format!("sending the id: {e}")))?;
    }
    Ok(id)
}

/// A rank other than 0 over TCP: connects (retrying while rank 0 is not yet listening), says
/// its world size and rank, and reads the id.
fn join(
    addr: &str,
    rank: usize,
    world: usize,
    deadline: Instant,
    r: &Rendezvous,
) -> Result<[u8; ID_BYTES]> {
    let targets: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| r.fail(format!("cannot resolve: {e}")))?
        .collect();
    let mut s = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(r, &format!("rank {rank} could not reach rank 0")));
        }
        let attempt = targets
            .iter()
            .find_map(|t| TcpStream::connect_timeout(t, left.min(Duration::from_secs(1))).ok());
        match attempt {
            Some(s) => break s,
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut hello = Vec::with_capacity(16);
    hello.extend_from_slice(&(world as u64).to_le_bytes());
    hello.extend_from_slice(&(rank as u64).to_le_bytes());
    s.write_all(&hello)
        .map_err(|e| r.fail(format!("rank {rank}: {e}")))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    s.set_read_timeout(Some(left))
        .map_err(|e| r.fail(e.to_string()))?;
    let mut status = [0u8; 1];
    s.read_exact(&mut status)
        .map_err(|_| timed_out(r, &format!("rank {rank} got no id from rank 0")))?;
    match status[0] {
        ACCEPTED => {}
        WRONG_WORLD => {
            return Err(r.fail(format!(
                "rank 0 was started with another world size than this rank's {world}"
            )))
        }
        GAVE_UP => {
            return Err(r.fail(format!(
                "rank 0 gave up after refusing another rank (its error says which); rank {rank} stops too"
            )))
        }
        _ => return Err(r.fail(format!("rank 0 refused rank {rank} (joined twice?)"))),
    }
    let mut id = [0u8; ID_BYTES];
    s.read_exact(&mut id)
        .map_err(|e| r.fail(format!("rank {rank} reading the id: {e}")))?;
    Ok(id)
}

/// Rank 0 through a file: writes world size and id to a temporary file, then renames it into
/// place, so that a reader sees all of it or nothing.
fn publish(path: &std::path::Path, world: usize, id: [u8; ID_BYTES]) -> Result<[u8; ID_BYTES]> {
    let r = Rendezvous::File(path.to_path_buf());
    if path.exists() {
        return Err(
            r.fail("the file already exists (left by an earlier run?): remove it or name another")
        );
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut bytes = (world as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&id);
    std::fs::write(&tmp, &bytes).map_err(|e| r.fail(format!("writing: {e}")))?;
    std::fs::rename(&tmp, path).map_err(|e| r.fail(format!("renaming into place: {e}")))?;
    Ok(id)
}

/// A rank other than 0 through a file: waits for it, checks the world size, reads the id.
fn read_file(
    path: &std::path::Path,
    world: usize,
    deadline: Instant,
    r: &Rendezvous,
) -> Result<[u8; ID_BYTES]> {
    loop {
        match std::fs::read(path) {
            Ok(b) if b.len() == 8 + ID_BYTES => {
                let theirs = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize;
                if theirs != world {
                    return Err(r.fail(format!(
                        "rank 0 was started with world size {theirs}, this rank with {world}"
                    )));
                }
                let mut id = [0u8; ID_BYTES];
                id.copy_from_slice(&b[8..]);
                return Ok(id);
            }
            Ok(b) => {
                return Err(r.fail(format!(
                    "holds {} bytes, not a rendezvous file of {} bytes",
                    b.len(),
                    8 + ID_BYTES
                )))
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(r.fail(format!("cannot read it: {e}")))
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => return Err(timed_out(r, "rank 0 wrote no id")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_addr() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    fn id(v: u8) -> [u8; ID_BYTES] {
        [v; ID_BYTES]
    }

    #[test]
    fn parses_addresses_and_files() {
        assert_eq!(
            "tcp://10.0.0.1:29500".parse::<Rendezvous>().unwrap(),
            Rendezvous::Tcp("10.0.0.1:29500".into())
        );
        assert_eq!(
            "localhost:1".parse::<Rendezvous>().unwrap(),
            Rendezvous::Tcp("localhost:1".into())
        );
        assert_eq!(
            "file:///tmp/x".parse::<Rendezvous>().unwrap(),
            Rendezvous::File("/tmp/x".into())
        );
        for bad in ["", "nohost", "host:port", ":12", "file:"] {
            let e = bad.parse::<Rendezvous>().unwrap_err().to_string();
            assert!(e.contains("rendezvous"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_rank_gets_rank_zeros_id_over_tcp_and_files() {
        let dir = std::env::temp_dir().join(format!("sl-rdv-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        for r in [
            Rendezvous::Tcp(free_addr()),
            Rendezvous::File(dir.join("id")),
        ] {
            let world = 4;
            let got: Vec<_> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..world)
                    .map(|rank| {
                        let r = r.clone();
                        s.spawn(move || {
                            r.exchange(rank, world, Duration::from_secs(10), || Ok(id(7)))
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for g in got {
                assert_eq!(g.unwrap(), id(7), "{r}");
            }
            r.finish(0);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rank_alone_times_out_with_a_clear_error() {
        let r = Rendezvous::Tcp(free_addr());
        let t = Instant::now();
        let e = r
            .exchange(1, 2, Duration::from_millis(300), || Ok(id(1)))
            .unwrap_err()
            .to_string();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(e.contains("could not reach rank 0"), "{e}");
        let e = r
            .exchange(0, 2, Duration::from_millis(300), || Ok(id(1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ranks [1] did not join"), "{e}");
        let f =
            Rendezvous::File(std::env::temp_dir().join(format!("sl-none-{}", std::process::id())));
        let e = f
            .exchange(1, 2, Duration::from_millis(100), || Ok(id(1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 0 wrote no id"), "{e}");
    }

    #[test]
    fn mismatched_world_sizes_and_ranks_are_refused() {
        let r = Rendezvous::Tcp(free_addr());
        let (a, b) = std::thread::scope(|s| {
            let r0 = r.clone();
            let h0 = s.spawn(move || r0.exchange(0, 2, Duration::from_secs(10), || Ok(id(1))));
            let h1 = s.spawn(|| r.exchange(1, 3, Duration::from_secs(10), || Ok(id(2))));
            (h0.join().unwrap(), h1.join().unwrap())
        });
        let (a, b) = (a.unwrap_err().to_string(), b.unwrap_err().to_string());
        assert!(a.contains("world size 3, rank 0 with 2"), "{a}");
        assert!(b.contains("another world size"), "{b}");
        let e = r
            .exchange(2, 2, Duration::from_secs(1), || Ok(id(1)))
            .unwrap_err();
        assert!(e.to_string().contains("`rank`"), "{e}");
        let e = r
            .exchange(0, 0, Duration::from_secs(1), || Ok(id(1)))
            .unwrap_err();
        assert!(e.to_string().contains("`world_size`"), "{e}");
    }

    #[test]
    fn ranks_already_accepted_hear_that_rank_zero_gave_up() {
        let addr = free_addr();
        let r = Rendezvous::Tcp(addr.clone());
        std::thread::scope(|s| {
            let r0 = r.clone();
            let h0 = s.spawn(move || r0.exchange(0, 3, Duration::from_secs(10), || Ok(id(1))));
            // Rank 1, by hand: connected (and so queued for rank 0) before rank 2 starts.
            let mut one = loop {
                match TcpStream::connect(&addr) {
                    Ok(c) => break c,
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            };
            let mut hello = 3u64.to_le_bytes().to_vec();
            hello.extend_from_slice(&1u64.to_le_bytes());
            one.write_all(&hello).unwrap();
            let c = r.exchange(2, 4, Duration::from_secs(10), || Ok(id(3)));
            let a = h0.join().unwrap().unwrap_err().to_string();
            assert!(a.contains("rank 2 was started with world size 4"), "{a}");
            let mut status = [0u8; 1];
            one.read_exact(&mut status).unwrap();
            assert_eq!(status[0], GAVE_UP);
            let c = c.unwrap_err().to_string();
            assert!(c.contains("another world size"), "{c}");
        });
    }

    #[test]
    fn an_unreadable_rendezvous_file_is_an_error_at_once() {
        let dir = std::env::temp_dir();
        let t = Instant::now();
        let e = Rendezvous::File(dir)
            .exchange(1, 2, Duration::from_secs(10), || Ok(id(1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read it"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
