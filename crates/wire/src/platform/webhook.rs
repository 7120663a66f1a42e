//! The one outbound HTTP call that is not a platform's: a completion hook's signed POST to
//! the operator's receiver (docs/design.md, "Completion hooks"). Here so that HTTP stays in
//! this layer; what is sent and when is `jobs/hooks.rs`.

use crate::secret::Secret;
use std::time::Duration;

/// `sha256=HEX` of the body under `key`: the `X-Syncfleet-Signature` header.
pub fn signature(key: &Secret, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(key.hmac_sha256(body)))
}

/// A receiver's URL and the key its bodies are signed with.
#[derive(Debug, Clone)]
pub struct Webhook {
    url: String,
    key: Secret,
    http: reqwest::Client,
}

impl Webhook {
    /// A receiver at `url` whose bodies are signed with `key` (a fresh HTTP client).
    pub fn new(url: String, key: Secret) -> Webhook {
        Webhook {
            url,
            key,
            http: reqwest::Client::new(),
        }
    }

    /// The URL as messages show it: no password, no query (a token may ride in it).
    fn shown(&self) -> String {
        let redacted = crate::secret::redact_url(&self.url);
        redacted
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// POST `body` (JSON), signed, with the delivery id every attempt repeats: `None` when
    /// the receiver answered 2xx, else why not (the URL, never the key).
    pub async fn post(&self, timeout: Duration, delivery: &str, body: String) -> Option<String> {
        let sent = self
            .http
            .post(&self.url)
            .timeout(timeout)
            .header("content-type", "application/json")
            .header("x-syncfleet-delivery", delivery)
            .header(
                "x-syncfleet-signature",
                signature(&self.key, body.as_bytes()),
            )
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!(
                "the receiver answered HTTP {}",
                r.status().as_u16()
            )),
            // The URL without its credentials (reqwest's message would name it whole): the
            // text goes to the log, the ledger and `syncfleet hooks`.
            Err(e) => Some(format!(
                "not delivered to {}: {}",
                self.shown(),
                e.without_url()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(&Secret::new("Jefe"), b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[tokio::test]
    async fn a_failed_delivery_names_the_url_without_its_credentials() {
        // Nothing listens on port 1: the connection is refused at once.
        let hook = Webhook::new(
            "http://ops:s3cretpw@127.0.0.1:1/hook?token=t0ken".into(),
            Secret::new("k"),
        );
        let error = hook
            .post(Duration::from_secs(5), "d1", "{}".into())
            .await
            .expect("not delivered");
        assert!(error.contains("127.0.0.1:1/hook"), "{error}");
        assert!(
            !error.contains("s3cretpw") && !error.contains("t0ken"),
            "{error}"
        );
    }
}
