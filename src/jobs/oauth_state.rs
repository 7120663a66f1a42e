//! The `state` of an authorisation link (docs/design.md, "Onboarding a seller"): the platform
//! echoes it back unchanged with the code, so it carries what the callback needs (the platform
//! and the shop name the operator chose) and proves the link was ours and recent: an
//! HMAC-SHA256 under the app secret over the rest, and an end time. No I/O; the clock is the
//! caller's.

use crate::platform::Platform;
use crate::secret::Secret;

/// How long a link may be followed: the seller logs in and agrees within it.
pub(crate) const STATE_LIFETIME_S: i64 = 30 * 60;

/// What a verified `state` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthState {
    /// The platform the link was made for.
    pub(crate) platform: Platform,
    /// The shop name the operator chose; `None`: the seller's own name.
    pub(crate) shop: Option<String>,
    /// Unix seconds after which the state is refused.
    pub(crate) expires_s: i64,
}

/// Why a `state` is refused. Never echoes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateError {
    /// Not one of ours, or altered.
    #[error("the authorisation's state is not one this app made (altered, or made with another app secret)")]
    Forged,
    /// Older than [`STATE_LIFETIME_S`].
    #[error("the authorisation link has expired: make a new one")]
    Expired,
    /// Made for another platform than the callback's.
    #[error("the authorisation link was made for {0}")]
    OtherPlatform(Platform),
}

/// `~` separates the fields: it is not in shop names and needs no escaping in a URL.
const SEP: char = '~';

impl OAuthState {
    /// The state for a link made at `now_s`.
    pub(crate) fn new(platform: Platform, shop: Option<&str>, now_s: i64) -> OAuthState {
        OAuthState {
            platform,
            shop: shop.map(str::to_string),
            expires_s: now_s + STATE_LIFETIME_S,
        }
    }

    fn body(&self) -> String {
        format!(
            "{}{SEP}{}{SEP}{}",
            self.platform.as_str(),
            self.shop.as_deref().unwrap_or(""),
            self.expires_s
        )
    }

    fn signed(body: &str) -> Vec<u8> {
        format!("syncfleet oauth state v1\0{body}").into_bytes()
    }

    fn tag(body: &str, key: &Secret) -> String {
        hex::encode(&key.hmac_sha256(&Self::signed(body))[..16])
    }

    /// The text the link carries, signed with `key` (the app secret).
    pub(crate) fn encode(&self, key: &Secret) -> String {
        let body = self.body();
        format!("{body}{SEP}{}", Self::tag(&body, key))
    }

    /// The platform `text` says it was made for, unchecked: which app secret checks it.
    pub(crate) fn claimed_platform(text: &str) -> Option<Platform> {
        text.split(SEP).next()?.parse().ok()
    }

    /// The state in `text`, if `key` signed it for `platform` and it has not ended at `now_s`.
    pub(crate) fn verify(
        text: &str,
        key: &Secret,
        platform: Platform,
        now_s: i64,
    ) -> Result<OAuthState, StateError> {
        let (body, tag) = text.rsplit_once(SEP).ok_or(StateError::Forged)?;
        // Checked in constant time (hmac's own comparison): the tag is a MAC.
        let tag = hex::decode(tag).map_err(|_| StateError::Forged)?;
        if tag.len() != 16 || !key.verify_hmac_sha256_prefix(&Self::signed(body), &tag) {
            return Err(StateError::Forged);
        }
        let mut parts = body.split(SEP);
        let (Some(p), Some(shop), Some(expires), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(StateError::Forged);
        };
        let made_for: Platform = p.parse().map_err(|_| StateError::Forged)?;
        let expires_s: i64 = expires.parse().map_err(|_| StateError::Forged)?;
        if made_for != platform {
            return Err(StateError::OtherPlatform(made_for));
        }
        if now_s > expires_s {
            return Err(StateError::Expired);
        }
        Ok(OAuthState {
            platform: made_for,
            shop: (!shop.is_empty()).then(|| shop.to_string()),
            expires_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_only_signed_for_its_platform_and_in_time() {
        let key = Secret::new("app-secret");
        let s = OAuthState::new(Platform::Taobao, Some("acme"), 1_000);
        let text = s.encode(&key);
        assert_eq!(
            OAuthState::verify(&text, &key, Platform::Taobao, 1_000 + STATE_LIFETIME_S),
            Ok(s.clone())
        );
        assert_eq!(
            OAuthState::verify(&text, &key, Platform::Taobao, 1_001 + STATE_LIFETIME_S),
            Err(StateError::Expired)
        );
        assert_eq!(
            OAuthState::verify(&text, &key, Platform::Jd, 1_000),
            Err(StateError::OtherPlatform(Platform::Taobao))
        );
        assert_eq!(
            OAuthState::verify(&text, &Secret::new("other"), Platform::Taobao, 1_000),
            Err(StateError::Forged)
        );
        // Another shop name under the same tag is refused.
        let altered = text.replacen("acme", "evil", 1);
        assert_eq!(
            OAuthState::verify(&altered, &key, Platform::Taobao, 1_000),
            Err(StateError::Forged)
        );
        // No shop chosen: the seller's name will be the shop's.
        let s = OAuthState::new(Platform::Alibaba, None, 5);
        let back = OAuthState::verify(&s.encode(&key), &key, Platform::Alibaba, 6).unwrap();
        assert_eq!(back.shop, None);
        assert_eq!(
            OAuthState::verify("garbage", &key, Platform::Alibaba, 6),
            Err(StateError::Forged)
        );
    }
}
