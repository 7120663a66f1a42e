//! Sealing a secret for a place where it may not go in the clear: shops' access and refresh
//! tokens are kept in the ledger, sealed, so every worker of the fleet uses the one renewal and
//! a shop added while the fleet runs reaches every worker (docs/design.md, "Tokens at rest").
//! AES-256-GCM from `ring` (already in the tree through rustls; never hand-rolled) under a key
//! derived with HKDF-SHA256 from a key the ledger never holds. The context (platform and shop)
//! is bound into the key and the tag, so a sealed value moved to another shop's row does not
//! open.
//!
//! The keys are a ring ([`SealKeys`]): the token key (`SYNCFLEET_TOKEN_KEY`, or the file
//! `SYNCFLEET_TOKEN_KEY_FILE` names), whose first key seals and every key opens, so a key is
//! rotated by putting the new one first, `syncfleet shop rekey`, then dropping the old one.
//! Each sealed value names its key by a fingerprint (`<id>.<hex>`). Without a token key a
//! platform's app secret is the one key (sealed values without an id): a fleet whose shops
//! all come from the config needs no new secret.

use crate::secret::Secret;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};

/// Why a sealed value could not be made or opened. Never carries the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The system's random source failed (no nonce).
    #[error("no random nonce could be drawn")]
    Random,
    /// Not ours: malformed, sealed under another key (the app secret changed) or another
    /// context, or altered.
    #[error("the sealed value does not open with this app's secret (changed secret, or altered)")]
    Open,
    /// Sealed under a key of the ring this process does not hold (names its fingerprint).
    #[error("the sealed value was sealed under token key {0}, which this process does not hold (SYNCFLEET_TOKEN_KEY)")]
    UnknownKey(String),
}

/// The token key could not be read: names the variable or file and what was expected, never
/// a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenKeyError {
    /// The file `SYNCFLEET_TOKEN_KEY_FILE` names could not be read.
    #[error("{file}: cannot read the token key file: {why}")]
    File {
        /// The file.
        file: String,
        /// Why (the I/O error).
        why: String,
    },
    /// A key is not 64 hex digits (32 random bytes).
    #[error("{source_name}, key {index}: expected 64 hex digits (32 random bytes, e.g. `openssl rand -hex 32`)")]
    Malformed {
        /// The variable or file.
        source_name: String,
        /// The key's position (1-based).
        index: usize,
    },
    /// The variable or file holds no key.
    #[error("{0}: holds no key")]
    Empty(String),
}

/// The variable holding the token key ring: keys of 64 hex digits separated by commas, the
/// first one sealing.
pub const TOKEN_KEY_ENV: &str = "SYNCFLEET_TOKEN_KEY";
/// The variable naming a file of keys, one a line (`#` comments), the first one sealing.
pub const TOKEN_KEY_FILE_ENV: &str = "SYNCFLEET_TOKEN_KEY_FILE";

const SALT: &[u8] = b"syncfleet sealed secret v1";

#[derive(Clone)]
struct RingKey {
    /// Fingerprint named in the values it seals; `None`: a platform's app secret (values
    /// sealed without an id).
    id: Option<String>,
    material: Secret,
}

/// The keys a process seals and opens with: the first seals, all open.
#[derive(Clone)]
pub struct SealKeys {
    keys: Vec<RingKey>,
}

impl std::fmt::Debug for SealKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealKeys")
            .field("ids", &self.ids())
            .finish()
    }
}

/// A key's fingerprint: the first 8 hex digits of SHA-256 over a label and the key, so it
/// names the key without helping to find it.
fn fingerprint(material: &[u8]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"syncfleet token key id v1\0");
    ctx.update(material);
    hex::encode(&ctx.finish().as_ref()[..4])
}

impl SealKeys {
    /// A platform's app secret as the one key (no token key configured).
    pub fn from_app_secret(app_secret: Secret) -> SealKeys {
        SealKeys {
            keys: vec![RingKey {
                id: None,
                material: app_secret,
            }],
        }
    }

    /// The ring in `text` (keys separated by commas or lines, `#` comments), named
    /// `source_name` in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<SealKeys, TokenKeyError> {
        let mut keys = Vec::new();
        for (index, raw) in text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .enumerate()
        {
            let bytes = hex::decode(raw).ok().filter(|b| b.len() == 32).ok_or(
                TokenKeyError::Malformed {
                    source_name: source_name.to_string(),
                    index: index + 1,
                },
            )?;
            keys.push(RingKey {
                id: Some(fingerprint(&bytes)),
                material: Secret::new(raw.to_ascii_lowercase()),
            });
        }
        if keys.is_empty() {
            return Err(TokenKeyError::Empty(source_name.to_string()));
        }
        Ok(SealKeys { keys })
    }

    /// The token key ring from the environment ([`TOKEN_KEY_ENV`], else the file
    /// [`TOKEN_KEY_FILE_ENV`] names); `None` when neither is set.
    pub fn from_env() -> Result<Option<SealKeys>, TokenKeyError> {
        if let Some(text) = std::env::var(TOKEN_KEY_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            return SealKeys::parse(&text, TOKEN_KEY_ENV).map(Some);
        }
        let Some(file) = std::env::var(TOKEN_KEY_FILE_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(&file).map_err(|e| TokenKeyError::File {
            file: file.clone(),
            why: e.to_string(),
        })?;
        SealKeys::parse(&text, &file).map(Some)
    }

    /// This ring, also opening values sealed under `app_secret` (before a token key was set).
    pub fn opening_app_secret(mut self, app_secret: Secret) -> SealKeys {
        self.keys.push(RingKey {
            id: None,
            material: app_secret,
        });
        self
    }

    /// The fingerprints of the ring's keys, the sealing one first (`app` for an app secret).
    pub fn ids(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| k.id.clone().unwrap_or_else(|| "app".to_string()))
            .collect()
    }

    /// Whether `sealed` was sealed under the sealing key.
    pub fn is_current(&self, sealed: &str) -> bool {
        let id = sealed.split_once('.').map(|(id, _)| id);
        id == self.keys.first().and_then(|k| k.id.as_deref())
    }

    /// `value` sealed under the sealing key for `context`.
    pub fn seal(&self, value: &Secret, context: &str) -> Result<String, SealError> {
        let key = self.keys.first().ok_or(SealError::Open)?;
        let hex = seal(value, &key.material, context)?;
        Ok(match &key.id {
            Some(id) => format!("{id}.{hex}"),
            None => hex,
        })
    }

    /// The value `sealed` holds, opened with the key it names.
    pub fn unseal(&self, sealed: &str, context: &str) -> Result<Secret, SealError> {
        let (id, body) = match sealed.split_once('.') {
            Some((id, body)) => (Some(id), body),
            None => (None, sealed),
        };
        let key = self
            .keys
            .iter()
            .find(|k| k.id.as_deref() == id)
            .ok_or_else(|| match id {
                Some(id) => SealError::UnknownKey(id.to_string()),
                None => SealError::Open,
            })?;
        unseal(body, &key.material, context)
    }
}

fn key(app_secret: &Secret, context: &str) -> Result<LessSafeKey, SealError> {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(app_secret.expose().as_bytes());
    let info = [context.as_bytes()];
    let okm = prk
        .expand(&info, &AES_256_GCM)
        .map_err(|_| SealError::Open)?;
    let mut bytes = [0u8; 32];
    okm.fill(&mut bytes).map_err(|_| SealError::Open)?;
    let unbound = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| SealError::Open)?;
    Ok(LessSafeKey::new(unbound))
}

/// `value` sealed under `app_secret` for `context`: hex of nonce, ciphertext and tag.
fn seal(value: &Secret, app_secret: &Secret, context: &str) -> Result<String, SealError> {
    let key = key(app_secret, context)?;
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| SealError::Random)?;
    let mut data = value.expose().as_bytes().to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(context.as_bytes()),
        &mut data,
    )
    .map_err(|_| SealError::Random)?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&data);
    Ok(hex::encode(out))
}

/// The value [`seal`] sealed under `app_secret` for `context`.
fn unseal(sealed: &str, app_secret: &Secret, context: &str) -> Result<Secret, SealError> {
    let bytes = hex::decode(sealed).map_err(|_| SealError::Open)?;
    if bytes.len() < NONCE_LEN + aead::AES_256_GCM.tag_len() {
        return Err(SealError::Open);
    }
    let (nonce, rest) = bytes.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
    let mut data = rest.to_vec();
    let key = key(app_secret, context)?;
    let plain = key
        .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
        .map_err(|_| SealError::Open)?;
    let text = std::str::from_utf8(plain).map_err(|_| SealError::Open)?;
    Ok(Secret::new(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_context() {
        let key = Secret::new("app-secret");
        let token = Secret::new("the-access-token");
        let sealed = seal(&token, &key, "taobao/shop1").unwrap();
        assert!(!sealed.contains("the-access-token"));
        assert_eq!(
            unseal(&sealed, &key, "taobao/shop1").unwrap().expose(),
            "the-access-token"
        );
        // A fresh nonce each time: the same value seals differently.
        assert_ne!(sealed, seal(&token, &key, "taobao/shop1").unwrap());
        assert_eq!(
            unseal(&sealed, &Secret::new("other"), "taobao/shop1").unwrap_err(),
            SealError::Open
        );
        assert_eq!(
            unseal(&sealed, &key, "taobao/shop2").unwrap_err(),
            SealError::Open
        );
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'0' { b'1' } else { b'0' };
        let altered = String::from_utf8(altered).unwrap();
        assert_eq!(
            unseal(&altered, &key, "taobao/shop1").unwrap_err(),
            SealError::Open
        );
        assert_eq!(unseal("zz", &key, "x").unwrap_err(), SealError::Open);
    }

    const K1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
    const K2: &str = "2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn a_ring_seals_with_its_first_key_and_opens_with_any() {
        let old = SealKeys::parse(K1, "env").unwrap();
        let token = Secret::new("the-access-token");
        let sealed = old.seal(&token, "taobao/s1").unwrap();
        assert!(sealed.starts_with(&format!("{}.", old.ids()[0])));
        assert!(old.is_current(&sealed));
        // The new key first, the old one still opening.
        let both = SealKeys::parse(&format!("{K2},{K1}"), "env").unwrap();
        assert!(!both.is_current(&sealed));
        assert_eq!(
            both.unseal(&sealed, "taobao/s1").unwrap().expose(),
            "the-access-token"
        );
        let resealed = both.seal(&token, "taobao/s1").unwrap();
        assert!(both.is_current(&resealed));
        // The old key alone cannot open what the new one sealed, and says which key it needs.
        assert_eq!(
            old.unseal(&resealed, "taobao/s1").unwrap_err(),
            SealError::UnknownKey(both.ids()[0].clone())
        );
        // A key file: lines and comments.
        let file = SealKeys::parse(&format!("# rotated\n{K2}\n\n{K1} # old\n"), "f").unwrap();
        assert_eq!(file.ids(), both.ids());
        // An app secret opens the values sealed before a token key was set.
        let app = SealKeys::from_app_secret(Secret::new("app-secret"));
        let legacy = app.seal(&token, "jd/s").unwrap();
        assert!(!legacy.contains('.'));
        let ring = both.clone().opening_app_secret(Secret::new("app-secret"));
        assert_eq!(
            ring.unseal(&legacy, "jd/s").unwrap().expose(),
            "the-access-token"
        );
        assert_eq!(both.unseal(&legacy, "jd/s").unwrap_err(), SealError::Open);
    }

    #[test]
    fn bad_keys_are_named_never_shown() {
        let e = SealKeys::parse(&format!("{K1},abc"), "SYNCFLEET_TOKEN_KEY").unwrap_err();
        assert_eq!(
            e,
            TokenKeyError::Malformed {
                source_name: "SYNCFLEET_TOKEN_KEY".into(),
                index: 2
            }
        );
        assert!(!e.to_string().contains(K1));
        assert!(matches!(
            SealKeys::parse(" # none\n", "f"),
            Err(TokenKeyError::Empty(_))
        ));
        assert!(!format!("{:?}", SealKeys::parse(K1, "e").unwrap()).contains(K1));
    }
}
