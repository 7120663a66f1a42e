//! A three-primary Redis Cluster on free loopback ports (private children, killed on drop;
//! never the machine's Redis): the slots split in three even ranges, no replicas.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::redis::{connection_at as connection, free_port, plain_args, wait_for, TestRedis};

pub struct TestCluster {
    dir: tempfile::TempDir,
    nodes: Vec<(u16, Child)>,
}

/// The slot ranges of the three shards.
pub const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

impl TestCluster {
    /// Start three nodes, give each a third of the slots, introduce them, and wait until
    /// every node says the cluster is ok.
    pub fn start() -> TestCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let own = dir.path().join(format!("node-{port}"));
            std::fs::create_dir_all(&own).expect("node folder");
            let mut args = plain_args(port);
            args.extend(
                [
                    "--dir",
                    &own.display().to_string(),
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ]
                .map(String::from),
            );
            let child = Command::new("redis-server")
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is not installed (apt-get install redis-server)");
            nodes.push((port, child));
        }
        for (port, _) in &nodes {
            let port = *port;
            wait_for("a cluster node", Duration::from_secs(10), || {
                connection(port).is_some()
            });
        }
        for (i, (port, _)) in nodes.iter().enumerate() {
            let mut c = connection(*port).expect("node");
            let (from, to) = RANGES[i];
            let _: () = ::redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(from)
                .arg(to)
                .query(&mut c)
                .expect("CLUSTER ADDSLOTSRANGE");
        }
        let first = nodes[0].0;
        let mut c = connection(first).expect("node");
        for (port, _) in &nodes[1..] {
            let _: () = ::redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(*port)
                .query(&mut c)
                .expect("CLUSTER MEET");
        }
        let cluster = TestCluster { dir, nodes };
        wait_for("the cluster to be ok", Duration::from_secs(60), || {
            cluster.nodes.iter().all(|(p, _)| {
                connection(*p)
                    .and_then(|mut c| {
                        ::redis::cmd("CLUSTER")
                            .arg("INFO")
                            .query::<String>(&mut c)
                            .ok()
                    })
                    .is_some_and(|info| {
                        info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
                    })
            })
        });
        cluster
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|(p, _)| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The cluster as the jobs harness's Redis (its URL; the cluster keeps the processes).
    pub fn as_test_redis(&self) -> TestRedis {
        TestRedis::external(self.url())
    }

    /// The port of the node that serves `key`'s slot.
    pub fn node_of(&self, key: &str) -> u16 {
        let mut c = connection(self.nodes[0].0).expect("node");
        let slot: u16 = ::redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut c)
            .expect("CLUSTER KEYSLOT");
        let i = RANGES
            .iter()
            .position(|(from, to)| (*from..=*to).contains(&slot))
            .expect("every slot is served");
        self.nodes[i].0
    }

    /// Keys on the node at `port` that match `pattern`.
    pub fn keys_on(&self, port: u16, pattern: &str) -> Vec<String> {
        let mut c = connection(port).expect("node");
        ::redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut c)
            .expect("KEYS")
    }

    /// The folder of the nodes' files.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
