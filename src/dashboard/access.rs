//! Who may read and act on the dashboard (docs/design.md, "Dashboard access").
//!
//! On loopback (the default) reads are open to the host's own users, and a request whose
//! `Host` is not a loopback name is refused: a web page elsewhere cannot reach the dashboard
//! through DNS rebinding. With `--allow-remote` the token is required for everything, reads
//! included (the page shows job failures, host names and the ledger's address): sent as
//! `Authorization: Bearer TOKEN`, or as the cookie a browser gets by posting the token to
//! `/login` (a form). Never in a URL: a query string stays in the browser's history, proxy
//! logs and `Referer` headers. The cookie is `HttpOnly`, `SameSite=Strict` and `Secure` (a
//! remote dashboard is served behind HTTPS). Actions always need the token. Tokens are compared by their SHA-256 digests, so the
//! comparison takes the same time whatever the given token's length or content.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The cookie a browser keeps the token in (remote mode).
const COOKIE: &str = "syncfleet_token";

/// The dashboard's token (`SYNCFLEET_DASHBOARD_TOKEN`), if set.
#[derive(Clone)]
pub(super) struct Token(Option<Arc<[u8; 32]>>);

impl Token {
    pub(super) fn new(token: Option<String>) -> Token {
        Token(
            token
                .filter(|t| !t.is_empty())
                .map(|t| Arc::new(Sha256::digest(t.as_bytes()).into())),
        )
    }

    pub(super) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `given` is the token, in time independent of `given`.
    fn matches(&self, given: &str) -> bool {
        let Some(want) = &self.0 else { return false };
        let got: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        got.iter()
            .zip(want.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// The token a request carries: the bearer header, else the cookie.
    fn given(headers: &HeaderMap) -> Option<&str> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        bearer.or_else(|| {
            headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        })
    }

    /// An action's check: the token must be set and given.
    pub(super) fn check(&self, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        if !self.is_set() {
            return Err((
                StatusCode::FORBIDDEN,
                "actions are disabled: start the dashboard with SYNCFLEET_DASHBOARD_TOKEN set"
                    .into(),
            ));
        }
        match Token::given(headers) {
            Some(t) if self.matches(t) => Ok(()),
            _ => Err((StatusCode::UNAUTHORIZED, "missing or wrong token".into())),
        }
    }
}

/// How the dashboard is served.
#[derive(Clone)]
pub(super) struct Access {
    pub(super) token: Token,
    /// `--allow-remote`: every request needs the token.
    pub(super) remote: bool,
}

/// Whether `host` (a `Host` header: name and optional port) names this host's loopback.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(n, _)| n)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The guard in front of every route.
pub(super) async fn guard(State(access): State<Access>, req: Request, next: Next) -> Response {
    if !access.remote {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !loopback_host(host) {
            return (
                StatusCode::MISDIRECTED_REQUEST,
                "this dashboard answers to its loopback address only (see --allow-remote)",
            )
                .into_response();
        }
        return next.run(req).await;
    }
    match req.uri().path() {
        "/login" => return login(&access, req).await,
        // A seller's browser coming back from the platform has no token: the signed state
        // and the single-use code are its proof (src/jobs/oauth_state.rs).
        "/oauth/callback" => return next.run(req).await,
        // A token in the URL is refused, not taken: it would stay in history and logs.
        "/" if req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv.starts_with("token="))) =>
        {
            return (
                StatusCode::BAD_REQUEST,
                "the token is never taken from a URL (it would stay in the browser's history and in logs): open /login",
            )
                .into_response();
        }
        _ => {}
    }
    match Token::given(req.headers()) {
        Some(t) if access.token.matches(t) => next.run(req).await,
        // A browser without the cookie is sent to the form.
        _ if req.uri().path() == "/" => Redirect::to("/login").into_response(),
        _ => (
            StatusCode::UNAUTHORIZED,
            "this dashboard needs its token: sign in at /login, or send Authorization: Bearer TOKEN",
        )
            .into_response(),
    }
}

/// The sign-in form (GET), and its post: the right token sets the cookie.
async fn login(access: &Access, req: Request) -> Response {
    const FORM: &str = "<!doctype html><meta charset=utf-8><title>syncfleet: sign in</title>\
        <form method=post action=/login><label>dashboard token \
        <input name=token type=password autocomplete=current-password autofocus></label> \
        <button>sign in</button></form>";
    if req.method() != axum::http::Method::POST {
        return axum::response::Html(FORM).into_response();
    }
    let Ok(body) = axum::body::to_bytes(req.into_body(), 4096).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "the form is too large").into_response();
    };
    let token = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .ok()
        .and_then(|fields| fields.into_iter().find(|(k, _)| k == "token"))
        .map(|(_, v)| v);
    match token {
        Some(t) if access.token.matches(&t) => {
            let mut resp = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&session_cookie(&t)) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        _ => (StatusCode::UNAUTHORIZED, "wrong token").into_response(),
    }
}

/// The cookie that keeps the token: out of scripts' reach, sent to this site only, over
/// HTTPS only.
fn session_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_matches_itself_only() {
        let t = Token::new(Some("s3cret".into()));
        assert!(t.matches("s3cret"));
        assert!(!t.matches("s3cre"));
        assert!(!t.matches("s3cret!"));
        assert!(!t.matches(""));
        assert!(!Token::new(None).matches(""));
        assert!(!Token::new(Some(String::new())).is_set());
    }

    #[test]
    fn the_cookie_is_for_https_and_out_of_scripts_reach() {
        let c = session_cookie("t");
        for part in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(c.split("; ").any(|p| p == part), "{c}");
        }
    }

    #[test]
    fn the_token_comes_from_the_header_or_the_cookie() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; syncfleet_token=xyz"),
        );
        assert_eq!(Token::given(&h), Some("xyz"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(Token::given(&h), Some("abc"));
    }

    #[test]
    fn loopback_hosts_are_told_apart() {
        for ok in [
            "127.0.0.1:8088",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8088",
            "127.0.0.2",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8088",
            "10.0.0.1:8088",
            "",
            "localhost.evil.example",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
