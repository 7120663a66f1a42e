//! How the ledger's PostgreSQL connection is protected when the URL does not say
//! (docs/design.md, "Security"). libpq's default, `prefer`, takes whatever the network
//! offers: a server that answers without TLS, or with any certificate, is believed. A ledger
//! on another host is reached over a network the fleet cannot trust, so there the default is
//! `verify-full` (TLS, the certificate signed by a trusted CA, the host name matching it);
//! over loopback or a Unix socket nothing crosses a network and `prefer` stays.
//!
//! A mode the operator names (`?sslmode=` in the URL, or `PGSSLMODE`) is kept; one that does
//! not verify the server, to another host, is worth a warning at start-up.

use sqlx::postgres::PgSslMode;

/// What the URL and the environment left unsaid, and what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsDecision {
    /// The operator's mode, which verifies the server, or a local connection: as is.
    Keep,
    /// No mode named, another host: verify the server fully.
    VerifyFull,
    /// The operator named a mode that does not verify the server, to another host.
    KeepUnverified,
}

/// The decision for a connection to `host` (empty for a Unix socket) with `named` the mode
/// the URL or `PGSSLMODE` gave, if any, and `mode` the one in effect.
pub(crate) fn decide(host: &str, socket: bool, named: bool, mode: PgSslMode) -> TlsDecision {
    if socket || is_loopback(host) {
        return TlsDecision::Keep;
    }
    if !named {
        return TlsDecision::VerifyFull;
    }
    match mode {
        PgSslMode::VerifyCa | PgSslMode::VerifyFull => TlsDecision::Keep,
        _ => TlsDecision::KeepUnverified,
    }
}

/// Whether the URL's query names `sslmode` (or sqlx's spelling `ssl-mode`).
pub(crate) fn url_names_mode(url: &str) -> bool {
    let Some((_, query)) = url.split_once('?') else {
        return false;
    };
    query
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .any(|key| key.eq_ignore_ascii_case("sslmode") || key.eq_ignore_ascii_case("ssl-mode"))
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_host_without_a_mode_is_verified_fully() {
        assert_eq!(
            decide("db.internal", false, false, PgSslMode::Prefer),
            TlsDecision::VerifyFull
        );
        assert_eq!(
            decide("10.0.0.7", false, false, PgSslMode::Prefer),
            TlsDecision::VerifyFull
        );
    }

    #[test]
    fn loopback_and_sockets_keep_the_default() {
        for host in ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"] {
            assert_eq!(
                decide(host, false, false, PgSslMode::Prefer),
                TlsDecision::Keep,
                "{host}"
            );
        }
        assert_eq!(
            decide("", true, false, PgSslMode::Prefer),
            TlsDecision::Keep
        );
    }

    #[test]
    fn a_named_mode_is_kept_and_an_unverified_one_flagged() {
        assert_eq!(
            decide("db", false, true, PgSslMode::VerifyFull),
            TlsDecision::Keep
        );
        assert_eq!(
            decide("db", false, true, PgSslMode::VerifyCa),
            TlsDecision::Keep
        );
        for mode in [PgSslMode::Require, PgSslMode::Prefer, PgSslMode::Disable] {
            assert_eq!(decide("db", false, true, mode), TlsDecision::KeepUnverified);
        }
    }

    #[test]
    fn the_mode_is_found_in_the_query_only() {
        assert!(url_names_mode("postgres://h/db?sslmode=require"));
        assert!(url_names_mode("postgres://h/db?user=a&ssl-mode=disable"));
        assert!(url_names_mode("postgres://h/db?SSLMODE=verify-full"));
        assert!(!url_names_mode("postgres://h/db"));
        assert!(!url_names_mode("postgres://h/sslmode?x=1"));
        assert!(!url_names_mode("postgres://h/db?sslrootcert=/ca.pem"));
    }
}
