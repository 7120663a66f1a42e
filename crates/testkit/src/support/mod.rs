//! Shared test support. Each integration test file that needs it says `mod support;`.
#![allow(dead_code)]

pub mod cluster;
pub mod ledger;
pub mod postgres;
pub mod proxy;
pub mod queue;
pub mod redis;
pub mod sentinel;
pub mod tls;
pub mod webdriver;

/// A TCP port free on 127.0.0.1 when asked.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The environment `config/local.toml` reads its secrets and sessions from: the simulator's
/// demo apps (config/sim.toml), as its header says to export them.
pub const LOCAL_CONFIG_ENV: [(&str, &str); 6] = [
    ("SIM_TAOBAO_SECRET", "sim-taobao-secret"),
    ("SIM_TAOBAO_SESSION", "sim-taobao-session"),
    ("SIM_JD_SECRET", "sim-jd-secret"),
    ("SIM_JD_TOKEN", "sim-jd-token"),
    ("SIM_ALIBABA_SECRET", "sim-alibaba-secret"),
    ("SIM_ALIBABA_TOKEN", "sim-alibaba-token"),
];
