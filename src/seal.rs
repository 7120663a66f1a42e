//! Sealing a secret for a place where it may not go in the clear: a shop's renewed access and
//! refresh tokens are kept in the ledger so every worker of the fleet uses the one renewal
//! (docs/design.md, "Token lifetimes"). AES-256-GCM from `ring` (already in the tree through
//! rustls; never hand-rolled) under a key derived with HKDF-SHA256 from the app secret, which
//! every worker of the app holds and the ledger never does. The context (platform and shop) is
//! bound into the key and the tag, so a sealed value moved to another shop's row does not open.

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
}

const SALT: &[u8] = b"syncfleet sealed secret v1";

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
pub fn seal(value: &Secret, app_secret: &Secret, context: &str) -> Result<String, SealError> {
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
pub fn unseal(sealed: &str, app_secret: &Secret, context: &str) -> Result<Secret, SealError> {
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
}
