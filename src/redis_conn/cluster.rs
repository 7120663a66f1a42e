//! The fleet's Redis as a Redis Cluster (docs/design.md, "Beyond one Redis").
//!
//! The URL names seed nodes: `redis+cluster://[user:password@]HOST:PORT[,HOST:PORT...]`, or
//! `rediss+cluster://...` for TLS (verified with the same files as `rediss://`). The client
//! learns the slot map from them and follows it (redirections, a resharding, a failover inside
//! the cluster). Every key one script or transaction touches shares a hash tag: one per gate
//! (`{platform:api}`), one for the queue (`{name}`), so gates spread over shards and no command
//! crosses slots.

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::TlsCertificates;

use super::RedisOpenError;

const PLAIN: &str = "redis+cluster://";
const TLS: &str = "rediss+cluster://";

/// Whether `url` names a cluster's seed nodes.
pub(crate) fn is_cluster_url(url: &str) -> bool {
    url.starts_with(PLAIN) || url.starts_with(TLS)
}

/// The seed nodes of a cluster URL as one-server URLs (with the same user info), and whether
/// they speak TLS. Errors never quote the password.
pub(crate) fn seed_urls(url: &str) -> Result<(Vec<String>, bool), RedisOpenError> {
    let bad = |why: &str| RedisOpenError::BadUrl(format!("cluster URL: {why}"));
    let (tls, rest) = match (url.strip_prefix(PLAIN), url.strip_prefix(TLS)) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(bad("expected redis+cluster:// or rediss+cluster://")),
    };
    let (userinfo, rest) = match rest.rfind('@') {
        Some(i) => (Some(&rest[..i]), &rest[i + 1..]),
        None => (None, rest),
    };
    let hosts = rest.strip_suffix('/').unwrap_or(rest);
    if hosts.contains('/') {
        return Err(bad(
            "a cluster has one database: no path after the nodes (expected HOST:PORT,...)",
        ));
    }
    let scheme = if tls { "rediss" } else { "redis" };
    let mut seeds = Vec::new();
    for host in hosts.split(',') {
        let (h, p) = host
            .rsplit_once(':')
            .ok_or_else(|| bad("each node is HOST:PORT"))?;
        if h.is_empty() || p.parse::<u16>().is_err() {
            return Err(bad("each node is HOST:PORT"));
        }
        seeds.push(match userinfo {
            Some(info) => format!("{scheme}://{info}@{h}:{p}/"),
            None => format!("{scheme}://{h}:{p}/"),
        });
    }
    Ok((seeds, tls))
}

/// A cluster client for `url`'s seeds, with these TLS certificates for `rediss+cluster://`.
pub(crate) fn client(
    url: &str,
    certificates: Option<TlsCertificates>,
) -> Result<(ClusterClient, redis::Client), RedisOpenError> {
    let (seeds, tls) = seed_urls(url)?;
    let refused = |e: redis::RedisError| RedisOpenError::BadUrl(super::without_url(&e));
    let mut b = ClusterClientBuilder::new(seeds.iter().map(String::as_str));
    if tls {
        if let Some(certs) = certificates.clone() {
            b = b.certs(certs);
        }
    }
    let cluster = b.build().map_err(refused)?;
    // One node's client, for subscriptions: a PUBLISH reaches every node of a cluster.
    let first = &seeds[0];
    let node = match (tls, certificates) {
        (true, Some(certs)) => redis::Client::build_with_tls(first.as_str(), certs)
            .map_err(|e| RedisOpenError::Tls(super::without_url(&e)))?,
        _ => redis::Client::open(first.as_str()).map_err(refused)?,
    };
    Ok((cluster, node))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_names_its_seeds() {
        let (seeds, tls) =
            seed_urls("redis+cluster://:pw@127.0.0.1:7000,10.0.0.2:7001/").expect("parses");
        assert_eq!(
            seeds,
            vec![
                "redis://:pw@127.0.0.1:7000/".to_string(),
                "redis://:pw@10.0.0.2:7001/".to_string()
            ]
        );
        assert!(!tls);
        let (seeds, tls) = seed_urls("rediss+cluster://h:1").expect("parses");
        assert_eq!(seeds, vec!["rediss://h:1/".to_string()]);
        assert!(tls);
    }

    #[test]
    fn a_bad_cluster_url_is_named_without_its_password() {
        for bad in [
            "redis+cluster://u:hunter2@h",
            "redis+cluster://u:hunter2@h:x",
            "redis+cluster://u:hunter2@h:1/0",
            "redis+cluster://u:hunter2@:1",
            "redis://h:1",
        ] {
            let e = seed_urls(bad).expect_err(bad);
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }
}
