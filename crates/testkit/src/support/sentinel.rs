//! A Redis primary, one replica and three sentinels on free loopback ports, all private
//! children killed on drop (never the machine's Redis): the fleet's Redis as production runs
//! it, for failover tests.
//!
//! Sentinels notice a dead primary after 1 s (`down-after-milliseconds`); a failover can
//! also be forced ([`SentinelSet::force_failover`]). Each sentinel writes its own config file
//! in the set's temporary folder (sentinel rewrites it as it learns).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::redis::{connection_at as connection, free_port, plain_args, wait_for, TestRedis};

/// The monitored service's name.
pub const SERVICE: &str = "sf";

pub struct SentinelSet {
    dir: tempfile::TempDir,
    /// Data servers by port (the first started as primary).
    data: Vec<(u16, Child)>,
    sentinels: Vec<(u16, Child)>,
}

fn spawn(args: &[String]) -> Child {
    Command::new("redis-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is not installed (apt-get install redis-server)")
}

/// An array of flat field/value arrays (SENTINEL REPLICAS) as maps.
fn records(v: Vec<Vec<String>>) -> Vec<HashMap<String, String>> {
    v.into_iter()
        .map(|flat| {
            flat.chunks(2)
                .filter_map(|kv| Some((kv.first()?.clone(), kv.get(1)?.clone())))
                .collect()
        })
        .collect()
}

/// A data server on `port` whose files (the RDB a replica receives in a full sync) stay in
/// its own folder under `dir`, never in the test's working directory, where the next server
/// started would load them.
fn data_args(dir: &std::path::Path, port: u16) -> Vec<String> {
    let own = dir.join(format!("data-{port}"));
    std::fs::create_dir_all(&own).expect("data server folder");
    let mut args = plain_args(port);
    args.extend(["--dir".to_string(), own.display().to_string()]);
    args
}

impl SentinelSet {
    /// Start the servers and wait until every sentinel knows the replica and the other two.
    pub fn start() -> SentinelSet {
        let dir = tempfile::tempdir().expect("temp dir");
        let primary = free_port();
        let mut data = vec![(primary, spawn(&data_args(dir.path(), primary)))];
        wait_for("the primary", Duration::from_secs(10), || {
            connection(primary).is_some()
        });
        let replica = free_port();
        let mut args = data_args(dir.path(), replica);
        args.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary.to_string(),
        ]);
        data.push((replica, spawn(&args)));
        let mut sentinels = Vec::new();
        for n in 0..3 {
            let port = free_port();
            let conf = dir.path().join(format!("sentinel{n}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {SERVICE} 1000\n\
                     sentinel failover-timeout {SERVICE} 10000\n\
                     sentinel parallel-syncs {SERVICE} 1\n",
                    dir = dir.path().display()
                ),
            )
            .expect("write sentinel.conf");
            sentinels.push((
                port,
                spawn(&[conf.display().to_string(), "--sentinel".into()]),
            ));
        }
        let set = SentinelSet {
            dir,
            data,
            sentinels,
        };
        set.wait_settled(Duration::from_secs(120));
        set
    }

    /// `redis+sentinel://` with every sentinel, for the fleet.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(p, _)| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    /// The set as the jobs harness's Redis (its URL; the set keeps the processes).
    pub fn as_test_redis(&self) -> TestRedis {
        TestRedis::external(self.url())
    }

    fn ask<T: ::redis::FromRedisValue>(&self, cmd: &mut ::redis::Cmd) -> Option<T> {
        self.sentinels.iter().find_map(|(p, _)| {
            let mut c = connection(*p)?;
            cmd.query(&mut c).ok()
        })
    }

    /// The port of the primary the sentinels name now.
    pub fn primary_port(&self) -> u16 {
        self.try_primary_port()
            .expect("a sentinel names the primary")
    }

    fn try_primary_port(&self) -> Option<u16> {
        let (_, port): (String, u16) = self.ask(
            ::redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(SERVICE),
        )?;
        Some(port)
    }

    /// Whether every sentinel sees the other two and a replica that is up and in sync, and
    /// the primary it names answers as primary.
    fn settled(&self) -> bool {
        let Some(primary) = self.try_primary_port() else {
            return false;
        };
        let role_ok = connection(primary)
            .and_then(|mut c| {
                let role: Vec<::redis::Value> = ::redis::cmd("ROLE").query(&mut c).ok()?;
                let first = role.first()?;
                Some(matches!(first, ::redis::Value::BulkString(b) if b == b"master"))
            })
            .unwrap_or(false);
        if !role_ok {
            return false;
        }
        self.sentinels.iter().all(|(p, _)| {
            let Some(mut c) = connection(*p) else {
                return false;
            };
            let others: Option<Vec<Vec<String>>> = ::redis::cmd("SENTINEL")
                .arg("SENTINELS")
                .arg(SERVICE)
                .query(&mut c)
                .ok();
            let replicas: Option<Vec<Vec<String>>> = ::redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(SERVICE)
                .query(&mut c)
                .ok();
            let (Some(others), Some(replicas)) = (others, replicas) else {
                return false;
            };
            let live_replicas = records(replicas)
                .iter()
                .filter(|r| {
                    r.get("flags").map(String::as_str) == Some("slave")
                        && r.get("master-link-status").map(String::as_str) == Some("ok")
                        && r.get("port").and_then(|p| p.parse::<u16>().ok()) != Some(primary)
                        && self
                            .data
                            .iter()
                            .any(|(dp, _)| Some(*dp) == r.get("port").and_then(|p| p.parse().ok()))
                })
                .count();
            others.len() == 2 && live_replicas >= 1
        })
    }

    /// Wait until [`SentinelSet::settled`].
    pub fn wait_settled(&self, timeout: Duration) {
        wait_for(
            "the sentinels to know a live replica and each other",
            timeout,
            || self.settled(),
        );
    }

    /// `SENTINEL FAILOVER`: the replica is promoted now (the old primary is demoted and, once
    /// reconfigured, replicates the new one). Returns the new primary's port.
    pub fn force_failover(&self) -> u16 {
        let before = self.primary_port();
        let _: String = self
            .ask(::redis::cmd("SENTINEL").arg("FAILOVER").arg(SERVICE))
            .expect("SENTINEL FAILOVER accepted");
        wait_for("the forced failover", Duration::from_secs(60), || {
            self.primary_port() != before
        });
        self.primary_port()
    }

    /// Kill the primary's process; the sentinels notice and promote the replica. Returns
    /// the new primary's port (the killed server is not restarted).
    pub fn kill_primary(&mut self) -> u16 {
        let before = self.primary_port();
        let i = self
            .data
            .iter()
            .position(|(p, _)| *p == before)
            .expect("the primary is one of the set's servers");
        let (_, mut child) = self.data.remove(i);
        let _ = child.kill();
        let _ = child.wait();
        wait_for(
            "the sentinels to promote a replica",
            Duration::from_secs(60),
            || self.primary_port() != before,
        );
        self.primary_port()
    }

    /// The folder holding the sentinels' config files (for a failed test's reader).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for (_, child) in self.sentinels.iter_mut().chain(self.data.iter_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
