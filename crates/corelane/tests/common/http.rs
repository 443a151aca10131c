//! An HTTP server on an ephemeral loopback port, and clients of it whose reads time out
//! (a server that never answers fails the test instead of hanging it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::tcp::static_file::StaticRoot;
use corelane::tcp::{Backend, Content, Server, ServerConfig, ServerTotals};

/// Every behaviour of the server (files aside) holds on both backends.
pub const BACKENDS: [Backend; 2] = [Backend::Epoll, Backend::Uring { sqpoll_cpu: None }];

/// Starts a server of `content` on `backend` once `configure` has set what the test needs;
/// the signal stops it.
pub fn start(
    backend: Backend,
    content: Content,
    configure: impl FnOnce(&mut ServerConfig),
) -> (Server, StopSignal) {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), content);
    config.backend = backend;
    configure(&mut config);
    let stop = StopSignal::new();
    let server = Server::start(config, stop.clone()).expect("server starts");
    (server, stop)
}

/// Starts a server of the files under `root`.
pub fn serve_root(
    root: &Path,
    backend: Backend,
    configure: impl FnOnce(&mut ServerConfig),
) -> (Server, StopSignal) {
    start(backend, Content::Root(StaticRoot::new(root).unwrap()), configure)
}

/// Stops the server and returns its totals once every lane has ended.
pub fn stop_and_wait(server: Server, stop: &StopSignal) -> ServerTotals {
    stop.stop();
    server.wait().expect("server stops")
}

/// A connection whose reads time out after 5 s.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Reads until the peer closes (or the read times out) and returns the text.
pub fn read_to_close(s: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

/// Sends `request` on a new connection and reads the answer until the server closes.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(request).unwrap();
    read_to_close(&mut s)
}
