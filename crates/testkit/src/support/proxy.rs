//! A loopback TCP proxy that can be frozen: while frozen it forwards nothing in either
//! direction but keeps every socket open (a stalled network path or a paused process, not a
//! refused connection). New connections are accepted and connected upstream, and stall too.
//! It can also be cut: every connection is closed, and new ones are closed as they come
//! (a server restarting, a firewall resetting connections), until it is restored.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct FreezableProxy {
    /// `host:port` the proxy listens on.
    pub addr: String,
    /// The upstream URL with its host and port replaced by the proxy's.
    pub url: String,
    frozen: watch::Sender<bool>,
    cut: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

/// `scheme://[creds@]host:port/rest` -> (prefix up to creds, host:port, rest).
fn split_url(url: &str) -> (&str, &str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let host_at = url[start..end].rfind('@').map_or(start, |i| start + i + 1);
    (&url[..host_at], &url[host_at..end], &url[end..])
}

impl FreezableProxy {
    /// Proxy to the server of `upstream_url` (e.g. `redis://127.0.0.1:PORT/`).
    pub async fn start(upstream_url: &str) -> FreezableProxy {
        let (prefix, upstream, rest) = split_url(upstream_url);
        let upstream = upstream.to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let url = format!("{prefix}{addr}{rest}");
        let (tx, rx) = watch::channel(false);
        let (cut_tx, cut_rx) = watch::channel(false);
        let accept = tokio::spawn(async move {
            // Dropped (aborting every connection) when the accept task is aborted.
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((down, _)) = listener.accept().await else {
                    return;
                };
                if *cut_rx.borrow() {
                    drop(down);
                    continue;
                }
                let (rx, upstream, mut cut) = (rx.clone(), upstream.clone(), cut_rx.clone());
                conns.spawn(async move {
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = down.set_nodelay(true);
                    let _ = up.set_nodelay(true);
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    // Cut: both sockets are dropped (closed) with the pumps.
                    tokio::select! {
                        _ = async { tokio::join!(pump(dr, uw, rx.clone()), pump(ur, dw, rx)) } => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
                while conns.try_join_next().is_some() {}
            }
        });
        FreezableProxy {
            addr,
            url,
            frozen: tx,
            cut: cut_tx,
            accept,
        }
    }

    /// Stop forwarding (bytes already read are held until [`FreezableProxy::thaw`]).
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Forward again, held bytes first.
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Close every connection, and each new one as it comes, until [`FreezableProxy::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Accept and forward connections again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copy `from` to `to`, never writing while frozen.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut frozen: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
