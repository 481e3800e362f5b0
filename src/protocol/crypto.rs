//! Feishu's callback cryptography: AES-256-CBC bodies and the two signature schemes.
//!
//! * Key = SHA-256 of the console's Encrypt Key; `encrypt = base64(iv || ciphertext)`;
//!   strict PKCS#7 (like the Python and Node SDKs, unlike Java's lenient strip).
//! * Event signature = hex(SHA-256(timestamp + nonce + encrypt_key + raw body)); plain
//!   SHA-256, not HMAC.
//! * Legacy card signature = hex(SHA-1(timestamp + nonce + verification_token + raw body)).
//!
//! Every comparison of a secret-derived value is constant-time.

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
use base64::{Engine, engine::general_purpose::STANDARD};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type Decryptor = cbc::Decryptor<aes::Aes256>;
type Encryptor = cbc::Encryptor<aes::Aes256>;

/// The AES-256 key derived from an Encrypt Key. Its `Debug` never shows the bytes.
#[derive(Clone)]
pub struct AesKey([u8; 32]);

impl std::fmt::Debug for AesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AesKey([REDACTED])")
    }
}

impl AesKey {
    /// `SHA-256(encrypt_key)`.
    pub fn derive(encrypt_key: &str) -> Self {
        Self(Sha256::digest(encrypt_key.as_bytes()).into())
    }
}

/// Why a body could not be decrypted. Deliberately coarse: the caller must not tell a
/// client which step failed (that would be a padding oracle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// Not base64.
    #[error("not base64")]
    Base64,
    /// Shorter than IV + one block, or not a whole number of blocks.
    #[error("bad length")]
    Length,
    /// PKCS#7 padding is wrong.
    #[error("bad padding")]
    Padding,
}

/// Decrypts an `encrypt` field into the plaintext bytes.
pub fn decrypt(key: &AesKey, encrypted_b64: &str) -> Result<Vec<u8>, DecryptError> {
    let mut data = STANDARD
        .decode(encrypted_b64.as_bytes())
        .map_err(|_| DecryptError::Base64)?;
    if data.len() < 32 || data.len() % 16 != 0 {
        return Err(DecryptError::Length);
    }
    let (iv, body) = data.split_at_mut(16);
    let dec = Decryptor::new_from_slices(&key.0, iv).map_err(|_| DecryptError::Length)?;
    let plain_len = dec
        .decrypt_padded_mut::<Pkcs7>(body)
        .map_err(|_| DecryptError::Padding)?
        .len();
    Ok(data[16..16 + plain_len].to_vec())
}

/// Encrypts `plaintext` with the given IV (used by `simulate`, tests and benchmarks).
pub fn encrypt(key: &AesKey, iv: [u8; 16], plaintext: &[u8]) -> String {
    let ct = Encryptor::new(&key.0.into(), &iv.into()).encrypt_padded_vec_mut::<Pkcs7>(plaintext);
    let mut out = Vec::with_capacity(16 + ct.len());
    out.extend_from_slice(&iv);
    out.extend_from_slice(&ct);
    STANDARD.encode(out)
}

/// A callback body as Feishu sends it, with its `X-Lark-Signature`: with an encrypt key,
/// `{"encrypt": …}` around `plaintext` (encrypted with `iv`) signed with the key; without
/// one, `plaintext` itself signed with an empty key. For `simulate`, tests and
/// benchmarks.
pub fn seal(
    encrypt_key: Option<&str>,
    timestamp: &str,
    nonce: &str,
    iv: [u8; 16],
    plaintext: &str,
) -> (String, String) {
    let body = match encrypt_key {
        Some(key) => {
            let enc = encrypt(&AesKey::derive(key), iv, plaintext.as_bytes());
            format!("{{\"encrypt\":\"{enc}\"}}")
        }
        None => plaintext.to_string(),
    };
    let signature = event_signature(timestamp, nonce, encrypt_key.unwrap_or(""), body.as_bytes());
    (body, signature)
}

/// `hex(SHA-256(timestamp + nonce + encrypt_key + body))`.
pub fn event_signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    signature::<Sha256>(timestamp, nonce, encrypt_key, body)
}

/// `hex(SHA-1(timestamp + nonce + verification_token + body))` (legacy card callbacks).
pub fn card_signature(timestamp: &str, nonce: &str, token: &str, body: &[u8]) -> String {
    signature::<Sha1>(timestamp, nonce, token, body)
}

/// `hex(D(timestamp + nonce + secret + body))`: both callback signatures, by digest.
fn signature<D: Digest>(timestamp: &str, nonce: &str, secret: &str, body: &[u8]) -> String {
    let mut h = D::new();
    h.update(timestamp.as_bytes());
    h.update(nonce.as_bytes());
    h.update(secret.as_bytes());
    h.update(body);
    hex::encode(h.finalize())
}

/// Constant-time equality of two byte strings (length is not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Compares a received hex signature with the expected one, case-insensitively and in
/// constant time.
pub fn signature_matches(expected_hex: &str, received: &str) -> bool {
    let received = received.trim().to_ascii_lowercase();
    ct_eq(expected_hex.as_bytes(), received.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_doc_vector_decrypts_to_hello_world() {
        let key = AesKey::derive("test key");
        let plain =
            decrypt(&key, "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=").expect("decrypts");
        assert_eq!(plain, b"hello world");
    }

    #[test]
    fn encrypt_then_decrypt_round_trips() {
        let key = AesKey::derive("另一个 key with spaces/ünïcode");
        let b64 = encrypt(&key, [7; 16], "{\"a\":\"ü\"}".as_bytes());
        assert_eq!(
            decrypt(&key, &b64).expect("round trip"),
            "{\"a\":\"ü\"}".as_bytes()
        );
    }

    #[test]
    fn wrong_key_or_short_input_is_rejected() {
        let b64 = encrypt(&AesKey::derive("right"), [1; 16], b"{\"x\":1}");
        assert!(decrypt(&AesKey::derive("wrong"), &b64).is_err());
        assert_eq!(
            decrypt(&AesKey::derive("k"), "AAAA"),
            Err(DecryptError::Length)
        );
        assert_eq!(
            decrypt(&AesKey::derive("k"), "%%%"),
            Err(DecryptError::Base64)
        );
    }

    #[test]
    fn signatures_compare_case_insensitively() {
        let sig = event_signature("1", "2", "k", b"{}");
        assert!(signature_matches(&sig, &sig.to_uppercase()));
        assert!(!signature_matches(&sig, &sig[1..]));
    }

    #[test]
    fn aes_key_debug_is_redacted() {
        assert_eq!(
            format!("{:?}", AesKey::derive("secret")),
            "AesKey([REDACTED])"
        );
    }
}
