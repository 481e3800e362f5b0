//! The signed, expiring, single-purpose tokens of `GET /media/{token}`: each names one
//! resource of one message (profile, message id, resource key, kind) and when it
//! expires, signed with HMAC-SHA256 under a key derived from the profile's agent secret
//! (which every replica has, so any replica can serve the URL). Nothing is stored.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::{agent::webhook::key_bytes, protocol::crypto::ct_eq};

/// What the derived key is for: media URLs, and nothing else signed with the secret.
const PURPOSE: &[u8] = b"feishu-bridge media url v1";

/// What a token grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The profile whose app reads the resource.
    #[serde(rename = "p")]
    pub profile: String,
    /// The message carrying it.
    #[serde(rename = "m")]
    pub message_id: String,
    /// Its `image_key` or `file_key`.
    #[serde(rename = "k")]
    pub key: String,
    /// `image` or `file`.
    #[serde(rename = "t")]
    pub kind: String,
    /// Unix seconds after which it is refused.
    #[serde(rename = "e")]
    pub expires: i64,
}

/// Why a token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a token at all.
    #[error("the media token is malformed")]
    Malformed,
    /// Its signature does not match (altered, or signed with another secret).
    #[error("the media token's signature does not match")]
    Tampered,
    /// Past its expiry.
    #[error("the media token has expired")]
    Expired,
}

fn mac(secret: &str, payload: &str) -> Vec<u8> {
    let mut derive =
        Hmac::<Sha256>::new_from_slice(&key_bytes(secret)).expect("HMAC takes any key length");
    derive.update(PURPOSE);
    let key = derive.finalize().into_bytes();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The token of `claims`, signed with `secret`.
pub fn sign(secret: &str, claims: &Claims) -> String {
    // Plain strings and a number: serialising cannot fail.
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
    let sig = URL_SAFE_NO_PAD.encode(mac(secret, &payload));
    format!("{payload}.{sig}")
}

/// What a token claims, before its signature is checked (to find whose secret checks it).
pub fn peek(token: &str) -> Result<Claims, TokenError> {
    let (payload, _) = token.split_once('.').ok_or(TokenError::Malformed)?;
    let bytes = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| TokenError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
}

/// The claims of a token signed with `secret` and not expired at `now` (Unix seconds);
/// the signature is compared in constant time.
pub fn verify(secret: &str, token: &str, now: i64) -> Result<Claims, TokenError> {
    let claims = peek(token)?;
    let (payload, sig) = token.split_once('.').ok_or(TokenError::Malformed)?;
    let sig = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| TokenError::Malformed)?;
    if !ct_eq(&sig, &mac(secret, payload)) {
        return Err(TokenError::Tampered);
    }
    if now > claims.expires {
        return Err(TokenError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            profile: "planner".into(),
            message_id: "om_1".into(),
            key: "img_1".into(),
            kind: "image".into(),
            expires: 1_000,
        }
    }

    #[test]
    fn a_token_opens_with_its_secret_until_it_expires() {
        let t = sign("whsec_c2VjcmV0", &claims());
        assert_eq!(verify("whsec_c2VjcmV0", &t, 1_000), Ok(claims()));
        assert_eq!(
            verify("whsec_c2VjcmV0", &t, 1_001),
            Err(TokenError::Expired)
        );
        assert_eq!(verify("other", &t, 0), Err(TokenError::Tampered));
    }

    #[test]
    fn an_altered_claim_breaks_the_signature() {
        let t = sign("s", &claims());
        let (_, sig) = t.split_once('.').expect("two parts");
        let mut other = claims();
        other.key = "img_2".into();
        other.expires = i64::MAX;
        let forged = format!(
            "{}.{sig}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&other).expect("json"))
        );
        assert_eq!(verify("s", &forged, 0), Err(TokenError::Tampered));
        assert_eq!(verify("s", "nope", 0), Err(TokenError::Malformed));
    }
}
