//! One HTTP client per platform (a bulkhead: a slow Taobao cannot starve JD of
//! connections), signing every call and classifying every failure.

use super::classify::{describe_reqwest, transport_kind, CallError, TransportError};
use super::clock::{http_date_ms, SharedPlatformClock};
use super::sign::SignMethod;
use super::{alibaba, jd, taobao, Api, ApiRequest, ApiResponse, Credentials, Platform};
use crate::secret::Secret;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

/// An HTTP answer before classification: status and body (JSON, or the text as a JSON
/// string when the body is not JSON, e.g. an HTML 502 page).
#[derive(Debug, Clone, PartialEq)]
pub struct RawResponse {
    /// The HTTP status.
    pub http_status: u16,
    /// The body: JSON, or its text as a JSON string.
    pub body: Value,
}

impl RawResponse {
    /// The answer's HTTP status.
    pub fn http_status(&self) -> u16 {
        self.http_status
    }

    /// The answer's body as JSON (a body that is not JSON is a JSON string of its text).
    pub fn body(&self) -> &Value {
        &self.body
    }
}

/// Why a platform client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `platforms.<p>.endpoint` does not parse as a URL.
    #[error("platforms.{platform}.endpoint `{endpoint}` is not a URL: {error}")]
    BadEndpoint {
        /// The platform whose endpoint it is.
        platform: Platform,
        /// The endpoint as configured.
        endpoint: String,
        /// The URL parser's error.
        error: <reqwest::Url as std::str::FromStr>::Err,
    },
    /// reqwest refused the client settings (TLS backend, ...).
    #[error("cannot build the {platform} HTTP client: {error}")]
    Http {
        /// The platform whose client it is.
        platform: Platform,
        /// reqwest's error.
        error: reqwest::Error,
    },
}

/// A signed-call client for one platform. Holds the secret and session (read once); its
/// `Debug` shows neither.
#[derive(Debug, Clone)]
pub struct PlatformClient {
    platform: Platform,
    endpoint: String,
    max_body_bytes: usize,
    creds: Credentials,
    http: reqwest::Client,
    /// The platform's clock as this client's answers show it (shared by its clones).
    clock: SharedPlatformClock,
}

/// How to reach one platform: what a client needs besides the credentials. The
/// configuration makes one from `[platforms.<p>]` (`config::PlatformConfig::client_options`).
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Full URL of the platform's gateway.
    pub endpoint: String,
    /// The app key the platform issued (not secret).
    pub app_key: String,
    /// TOP only: how requests are signed.
    pub sign_method: SignMethod,
    /// Bound on establishing a connection.
    pub connect_timeout: Duration,
    /// How long a pooled connection may sit idle: below the platform's own idle close.
    pub idle_keepalive: Duration,
    /// Idle connections kept per host.
    pub max_idle_per_host: usize,
    /// The largest answer body read; a larger one is a [`TransportError::TooLarge`] failure,
    /// refused from its declared length or cut off once the limit is passed.
    pub max_body_bytes: usize,
}

impl PlatformClient {
    /// Build a client signing with `secret` (and `session`, where the platform takes one).
    pub fn new(
        platform: Platform,
        cfg: &ClientOptions,
        secret: Secret,
        session: Option<Secret>,
    ) -> Result<Self, ClientError> {
        let url: reqwest::Url = cfg
            .endpoint
            .parse()
            .map_err(|error| ClientError::BadEndpoint {
                platform,
                endpoint: cfg.endpoint.clone(),
                error,
            })?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            // Shorter than the platform's idle close, so a pooled connection is dropped by
            // us first: a reused dead connection costs a full read timeout.
            .pool_idle_timeout(cfg.idle_keepalive)
            .pool_max_idle_per_host(cfg.max_idle_per_host.max(1))
            .tcp_nodelay(true)
            .user_agent(concat!("syncfleet/", env!("CARGO_PKG_VERSION")));
        let host = url
            .host_str()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']');
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if loopback {
            // A proxy from the environment must never see simulator traffic.
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|error| ClientError::Http { platform, error })?;
        Ok(PlatformClient {
            platform,
            endpoint: cfg.endpoint.trim_end_matches('/').to_string(),
            max_body_bytes: cfg.max_body_bytes,
            creds: Credentials {
                app_key: cfg.app_key.clone(),
                secret,
                session,
                sign_method: cfg.sign_method,
            },
            http,
            clock: SharedPlatformClock::default(),
        })
    }

    /// The platform this client calls.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// The platform's clock as the answers of this client and its clones show it.
    pub fn clock(&self) -> SharedPlatformClock {
        self.clock.clone()
    }

    /// The same client (connection pool included) signing with another shop's session.
    pub fn with_session(&self, session: Secret) -> PlatformClient {
        let mut c = self.clone();
        c.creds.session = Some(session);
        c
    }

    /// One signed call of a typed request, parsed. `read_timeout` bounds the whole call
    /// (connect is bounded separately by the config's connect timeout).
    pub async fn call(
        &self,
        req: &ApiRequest,
        read_timeout: Duration,
    ) -> Result<ApiResponse, CallError> {
        let raw = self.call_raw(req, read_timeout).await?;
        check_body(
            self.platform,
            req.api(),
            raw.http_status,
            &raw.body,
            Utc::now(),
        )?;
        parse_response(self.platform, req, &raw.body)
    }

    /// One signed call of a typed request, its answer as sent: for holding a platform's (or
    /// the simulator's) answers to recorded ones. Only transport failures are errors.
    pub async fn call_raw(
        &self,
        req: &ApiRequest,
        read_timeout: Duration,
    ) -> Result<RawResponse, CallError> {
        let api = req.api();
        if !api.offered_by(self.platform) {
            return Err(CallError::not_offered(self.platform, api));
        }
        let params = business_params(self.platform, req);
        self.exchange(api, &params, read_timeout).await
    }

    /// Sign and send; only transport failures are errors here (the body is not judged).
    pub async fn exchange(
        &self,
        api: Api,
        params: &[(String, String)],
        read_timeout: Duration,
    ) -> Result<RawResponse, CallError> {
        let now = Utc::now();
        let (url, form) = self.signed(api, params, now);
        let transport = |e: reqwest::Error| {
            CallError::transport(self.platform, api, transport_kind(&e), describe_reqwest(e))
        };
        let resp = self
            .http
            .post(&url)
            .timeout(read_timeout)
            .form(&form)
            .send()
            .await
            .map_err(transport)?;
        let http_status = resp.status().as_u16();
        if let Some(date) = resp
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(http_date_ms)
        {
            self.clock.observe(date, Utc::now().timestamp_millis());
        }
        let too_large = |len: String| {
            CallError::transport(
                self.platform,
                api,
                TransportError::TooLarge,
                format!(
                    "answer body of {len} bytes is over the limit of {} bytes (HTTP {http_status})",
                    self.max_body_bytes
                ),
            )
        };
        if let Some(len) = resp
            .content_length()
            .filter(|n| *n > self.max_body_bytes as u64)
        {
            return Err(too_large(len.to_string()));
        }
        // Read in chunks, never more than the limit (a body without a declared length, or one
        // that lies about it, is cut off as soon as it passes).
        let mut bytes = Vec::new();
        let mut resp = resp;
        while let Some(chunk) = resp.chunk().await.map_err(transport)? {
            if bytes.len() + chunk.len() > self.max_body_bytes {
                return Err(too_large(format!("more than {}", self.max_body_bytes)));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(RawResponse {
            http_status,
            body: decode_body(&bytes),
        })
    }

    /// The URL and the signed form of one call.
    fn signed(
        &self,
        api: Api,
        params: &[(String, String)],
        now: DateTime<Utc>,
    ) -> (String, Vec<(String, String)>) {
        match self.platform {
            Platform::Taobao => (
                self.endpoint.clone(),
                taobao::signed_form(&self.creds, api, params, now),
            ),
            Platform::Jd => (
                self.endpoint.clone(),
                jd::signed_form(&self.creds, api, params, now),
            ),
            Platform::Alibaba => {
                let (path, form) = alibaba::signed_form(&self.creds, api, params, now);
                (format!("{}/{path}", self.endpoint), form)
            }
        }
    }
}

/// An answer body as JSON, or its text (the first 2,000 characters) as a JSON string when it
/// is not JSON (e.g. an HTML 502 page), for the platform's `check_body` to classify.
pub fn decode_body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(bytes);
        Value::String(text.chars().take(2000).collect())
    })
}

/// The platform's business params of a typed request.
pub fn business_params(platform: Platform, req: &ApiRequest) -> Vec<(String, String)> {
    match platform {
        Platform::Taobao => taobao::business_params(req),
        Platform::Jd => jd::business_params(req),
        Platform::Alibaba => alibaba::business_params(req),
    }
}

/// Params a raw TOP call needs and a person typing `syncfleet call` forgets.
pub fn with_raw_defaults(
    platform: Platform,
    api: Api,
    params: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out = params.to_vec();
    let mut default = |k: &str, v: &str| {
        if !out.iter().any(|(ok, _)| ok == k) {
            out.push((k.to_string(), v.to_string()));
        }
    };
    match (platform, api) {
        (Platform::Taobao, Api::ItemGet) => default("fields", super::wire::TOP_ITEM_FIELDS),
        (Platform::Taobao, Api::OrderList) => default("use_has_next", "true"),
        _ => {}
    }
    out
}

/// Judge a body: `Err` with the classified platform error, `Ok` for a success body.
pub fn check_body(
    platform: Platform,
    api: Api,
    http_status: u16,
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(), CallError> {
    match platform {
        Platform::Taobao => taobao::check_body(api, http_status, body, now),
        Platform::Jd => jd::check_body(api, http_status, body, now),
        Platform::Alibaba => alibaba::check_body(api, http_status, body, now),
    }
}

/// Parse a success body into the typed response of `req`.
pub fn parse_response(
    platform: Platform,
    req: &ApiRequest,
    body: &Value,
) -> Result<ApiResponse, CallError> {
    match platform {
        Platform::Taobao => taobao::parse_response(req, body),
        Platform::Jd => jd::parse_response(req, body),
        Platform::Alibaba => alibaba::parse_response(req, body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::{ErrorClass, TransportError};

    fn cfg(endpoint: &str) -> ClientOptions {
        ClientOptions {
            endpoint: endpoint.into(),
            app_key: "k".into(),
            sign_method: SignMethod::default(),
            connect_timeout: Duration::from_secs(2),
            idle_keepalive: Duration::from_secs(25),
            max_idle_per_host: 4,
            max_body_bytes: 1 << 20,
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let c = PlatformClient::new(
            Platform::Taobao,
            &cfg("http://127.0.0.1:9/router/rest"),
            Secret::new("very-secret-value"),
            Some(Secret::new("very-secret-session")),
        )
        .unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("very-secret"), "{dbg}");
    }

    /// A one-connection HTTP server on loopback that answers any request with `head` and
    /// then `body_len` bytes of JSON-ish filler (streamed, then the connection closes).
    async fn serve_once(head: String, body_len: usize) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(head.as_bytes()).await;
            let chunk = vec![b' '; 64 * 1024];
            let mut left = body_len;
            while left > 0 {
                let n = left.min(chunk.len());
                if sock.write_all(&chunk[..n]).await.is_err() {
                    return; // the client stopped reading: what the limit is for
                }
                left -= n;
            }
        });
        port
    }

    async fn item_get(port: u16) -> CallError {
        let c = PlatformClient::new(
            Platform::Taobao,
            &cfg(&format!("http://127.0.0.1:{port}/router/rest")),
            Secret::new("very-secret-value"),
            None,
        )
        .unwrap();
        c.call(
            &ApiRequest::ItemGet {
                item_id: "1".into(),
            },
            Duration::from_secs(10),
        )
        .await
        .unwrap_err()
    }

    #[tokio::test]
    async fn a_body_declared_over_the_limit_is_refused_unread() {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            64 << 20
        );
        let e = item_get(serve_once(head, 64 << 20).await).await;
        assert_eq!(e.transport, Some(TransportError::TooLarge), "{e}");
        assert_eq!(e.class, ErrorClass::Retry, "{e}");
        assert!(e.to_string().contains("over the limit"), "{e}");
    }

    #[tokio::test]
    async fn a_body_without_a_length_is_cut_off_at_the_limit() {
        // No Content-Length: the body runs until the connection closes (64 MiB here).
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
            .to_string();
        let e = item_get(serve_once(head, 64 << 20).await).await;
        assert_eq!(e.transport, Some(TransportError::TooLarge), "{e}");
    }

    #[tokio::test]
    async fn refused_connection_is_a_connect_retry() {
        // Bind then drop a listener: nothing listens on that port any more.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = PlatformClient::new(
            Platform::Taobao,
            &cfg(&format!("http://127.0.0.1:{port}/router/rest")),
            Secret::new("very-secret-value"),
            None,
        )
        .unwrap();
        let e = c
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                Duration::from_secs(2),
            )
            .await
            .unwrap_err();
        assert_eq!(
            (e.class, e.transport),
            (ErrorClass::Retry, Some(TransportError::Connect)),
            "{e}"
        );
        assert!(e.surely_not_sent());
        assert!(!e.to_string().contains("very-secret"), "{e}");
    }

    #[test]
    fn raw_defaults_fill_what_top_needs() {
        let p = with_raw_defaults(
            Platform::Taobao,
            Api::ItemGet,
            &[("num_iid".into(), "1".into())],
        );
        assert!(p
            .iter()
            .any(|(k, v)| k == "fields" && v == crate::platform::wire::TOP_ITEM_FIELDS));
        let p = with_raw_defaults(
            Platform::Taobao,
            Api::ItemGet,
            &[("fields".into(), "title".into())],
        );
        assert_eq!(p.iter().filter(|(k, _)| k == "fields").count(), 1);
    }
}
