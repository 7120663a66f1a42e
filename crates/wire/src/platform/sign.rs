//! Request signatures of the three platforms (docs/design.md, "Signing"). Pure functions, shared
//! by the adapters (to sign) and the simulator (to verify).

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// TOP's `sign_method` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SignMethod {
    /// `md5`: MD5 over secret + params + secret.
    #[serde(rename = "md5")]
    Md5,
    /// `hmac`: HMAC-MD5 keyed with the secret.
    #[serde(rename = "hmac")]
    HmacMd5,
    /// `hmac-sha256`: HMAC-SHA256 keyed with the secret (the default).
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
}

impl SignMethod {
    /// The value sent as `sign_method` (`md5`, `hmac`, `hmac-sha256`).
    pub fn as_str(self) -> &'static str {
        match self {
            SignMethod::Md5 => "md5",
            SignMethod::HmacMd5 => "hmac",
            SignMethod::HmacSha256 => "hmac-sha256",
        }
    }

    /// The method a `sign_method` value names; `None` for any other value.
    pub fn parse(s: &str) -> Option<SignMethod> {
        match s {
            "md5" => Some(SignMethod::Md5),
            "hmac" => Some(SignMethod::HmacMd5),
            "hmac-sha256" => Some(SignMethod::HmacSha256),
            _ => None,
        }
    }
}

fn upper_hex(bytes: &[u8]) -> String {
    hex::encode_upper(bytes)
}

/// `key1value1key2value2...` over params sorted by key (byte order), empty values skipped.
fn concat_sorted<'a>(params: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let sorted: BTreeMap<&str, &str> = params.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    let mut s = String::new();
    for (k, v) in sorted {
        s.push_str(k);
        s.push_str(v);
    }
    s
}

/// Taobao TOP signature over all request params except `sign` itself.
pub fn top_sign<'a>(
    secret: &str,
    method: SignMethod,
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let s = concat_sorted(params.into_iter().filter(|(k, _)| *k != "sign"));
    match method {
        SignMethod::Md5 => {
            let mut h = Md5::new();
            h.update(secret.as_bytes());
            h.update(s.as_bytes());
            h.update(secret.as_bytes());
            upper_hex(&h.finalize())
        }
        SignMethod::HmacMd5 => {
            // HMAC accepts keys of any length; new_from_slice cannot fail for HMAC.
            let mut mac = Hmac::<Md5>::new_from_slice(secret.as_bytes())
                .expect("HMAC accepts any key length");
            mac.update(s.as_bytes());
            upper_hex(&mac.finalize().into_bytes())
        }
        SignMethod::HmacSha256 => {
            let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
                .expect("HMAC accepts any key length");
            mac.update(s.as_bytes());
            upper_hex(&mac.finalize().into_bytes())
        }
    }
}

/// JD JOS signature: `MD5(secret + sorted key+value + secret)` over every param sent but
/// `sign` itself, as JD's SDKs sign what they send.
pub fn jd_sign<'a>(secret: &str, params: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let s = concat_sorted(params.into_iter().filter(|(k, _)| *k != "sign"));
    let mut h = Md5::new();
    h.update(secret.as_bytes());
    h.update(s.as_bytes());
    h.update(secret.as_bytes());
    upper_hex(&h.finalize())
}

/// 1688 signature: `HMAC-SHA1(secret, url_path + sorted(key+value strings))`, where
/// `url_path` is `param2/1/{namespace}/{apiName}/{appKey}`; `_aop_signature` is not signed.
pub fn alibaba_sign<'a>(
    secret: &str,
    url_path: &str,
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut pairs: Vec<String> = params
        .into_iter()
        .filter(|(k, _)| *k != "_aop_signature")
        .map(|(k, v)| format!("{k}{v}"))
        .collect();
    pairs.sort();
    let mut mac =
        Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC accepts any key length");
    mac.update(url_path.as_bytes());
    for p in &pairs {
        mac.update(p.as_bytes());
    }
    upper_hex(&mac.finalize().into_bytes())
}

/// Constant-time comparison of two signatures (the simulator verifies with it).
pub fn signatures_match(expected: &str, given: &str) -> bool {
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| {
        acc | (x.to_ascii_uppercase() ^ y.to_ascii_uppercase())
    }) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_md5_vector() {
        let params = [
            ("app_key", "12345678"),
            ("fields", "num_iid,title,nick,price,num"),
            ("format", "json"),
            ("method", "taobao.item.seller.get"),
            ("num_iid", "11223344"),
            ("session", "test"),
            ("sign_method", "md5"),
            ("timestamp", "2016-01-01 12:00:00"),
            ("v", "2.0"),
        ];
        assert_eq!(
            top_sign("helloworld", SignMethod::Md5, params),
            "66987CB115214E59E6EC978214934FB8"
        );
    }

    #[test]
    fn top_skips_empty_values_and_sign() {
        let base = [("a", "1"), ("b", "2")];
        let with_extra = [("a", "1"), ("b", "2"), ("c", ""), ("sign", "XYZ")];
        for m in [SignMethod::Md5, SignMethod::HmacMd5, SignMethod::HmacSha256] {
            assert_eq!(top_sign("s", m, base), top_sign("s", m, with_extra));
        }
        // The three methods give different digests of different lengths.
        assert_eq!(top_sign("s", SignMethod::HmacMd5, base).len(), 32);
        assert_eq!(top_sign("s", SignMethod::HmacSha256, base).len(), 64);
        assert_ne!(
            top_sign("s", SignMethod::Md5, base),
            top_sign("s", SignMethod::HmacMd5, base)
        );
    }

    #[test]
    fn jd_vector() {
        let params = [
            (
                "360buy_param_json",
                r#"{"end_date":null,"optional_fields":null,"order_state":"WAIT_SELLER_STOCK_OUT","page":"1","page_size":"200","start_date":null}"#,
            ),
            ("access_token", "yourtoken"),
            ("app_key", "yourappkey"),
            ("method", "jingdong.pop.order.search"),
            ("timestamp", "2021-05-07 09:20:39.683+0800"),
            ("v", "2.0"),
        ];
        assert_eq!(
            jd_sign("yourappSecret", params),
            "D70825340F4084360B9362B60DFD7930"
        );
        // Whatever is sent is signed: a `format` sent along changes the signature.
        let mut with_format = params.to_vec();
        with_format.push(("format", "json"));
        assert_ne!(
            jd_sign("yourappSecret", with_format),
            "D70825340F4084360B9362B60DFD7930"
        );
    }

    #[test]
    fn alibaba_vector() {
        assert_eq!(
            alibaba_sign(
                "test123",
                "param2/1/system/currentTime/1000000",
                [("b", "2"), ("a", "1")]
            ),
            "33E54F4F7B989E3E0E912D3FBD2F1A03CA7CCE88"
        );
    }

    #[test]
    fn signature_comparison() {
        assert!(signatures_match("ABCD", "abcd"));
        assert!(!signatures_match("ABCD", "ABCE"));
        assert!(!signatures_match("ABCD", "ABC"));
    }
}
