//! Keying: a keyed BLAKE3 hash chain over message prefixes.

use rampart_core::Role;
use serde::{Deserialize, Serialize};
use std::fmt;
use unicode_normalization::UnicodeNormalization;

/// A 32-byte keyed BLAKE3 hash naming one conversation prefix. Its `Debug` shows 8 hex
/// digits only.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChainKey(pub [u8; 32]);

impl fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainKey(")?;
        for b in &self.0[..4] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "…)")
    }
}

/// The secret key of the chain. Derived from key material (a deployment secret) with
/// BLAKE3's key derivation; without it nobody can compute or test keys offline.
#[derive(Clone)]
pub struct ChainSecret([u8; 32]);

impl fmt::Debug for ChainSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChainSecret(<redacted>)")
    }
}

const CONTEXT: &str = "rampart-conversation 2026 chain key v1";
const TENANT_CONTEXT: &str = "rampart-conversation 2026 tenant chain key v1";

impl ChainSecret {
    /// Derives the chain secret from arbitrary key material.
    pub fn derive(key_material: &[u8]) -> Self {
        Self(blake3::derive_key(CONTEXT, key_material))
    }

    fn hash(&self, domain: u8, parts: &[&[u8]]) -> [u8; 32] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(&[domain]);
        for p in parts {
            h.update(p);
        }
        *h.finalize().as_bytes()
    }

    /// The secret of one tenant's partition: derived from this one and the tenant's name,
    /// so two tenants' chain keys, hints and fingerprints never meet (issue 35: one API
    /// key's conversation could block, or unblock, another's).
    pub fn for_tenant(&self, tenant: &str) -> ChainSecret {
        let mut material = Vec::with_capacity(32 + tenant.len());
        material.extend_from_slice(&self.0);
        material.extend_from_slice(tenant.as_bytes());
        Self(blake3::derive_key(TENANT_CONTEXT, &material))
    }

    /// The secret and tag of a tenant's partition: this secret and tag 0 for the default
    /// partition (`None`), else [`for_tenant`](Self::for_tenant) and
    /// [`tenant_tag`](Self::tenant_tag). The store and the ledger partition alike.
    pub(crate) fn partition(&self, tenant: Option<&str>) -> (ChainSecret, u64) {
        match tenant {
            None => (self.clone(), 0),
            Some(t) => (self.for_tenant(t), self.tenant_tag(t)),
        }
    }

    /// A 64-bit tag naming a tenant inside the store (its quota and LRU), never 0.
    pub(crate) fn tenant_tag(&self, tenant: &str) -> u64 {
        let h = self.hash(7, &[tenant.as_bytes()]);
        u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]).max(1)
    }

    /// `key_0 = H(k, "root")`.
    pub fn root(&self) -> ChainKey {
        ChainKey(self.hash(0, &[b"root"]))
    }

    /// `H(k, normalized text)`: the message hash that goes into the chain.
    pub fn message_hash(&self, text: &str) -> [u8; 32] {
        self.hash(1, &[normalize(text).as_bytes()])
    }

    /// `key_i = H(k, key_{i-1} || role || H(k, normalized text))`.
    pub fn next(&self, prev: &ChainKey, role: Role, text: &str) -> ChainKey {
        let m = self.message_hash(text);
        ChainKey(self.hash(2, &[&prev.0, &[role_byte(role)], &m]))
    }

    /// Keyed hash of a client-sent conversation id (a hint).
    pub fn hint(&self, id: &str) -> [u8; 32] {
        self.hash(3, &[id.as_bytes()])
    }

    /// The 64-bit key under which fingerprint shingles are hashed.
    pub(crate) fn shingle_hash(&self, shingle: &str) -> u64 {
        let h = self.hash(4, &[shingle.as_bytes()]);
        u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
    }

    /// The 32-bit keyed hash of a content word (rephrasing by shared words).
    pub(crate) fn word_hash(&self, word: &str) -> u32 {
        let h = self.hash(6, &[word.as_bytes()]);
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    }

    /// The ledger entry of an assistant message: `H(k, 5 || prefix key || H(k, normalized text))`.
    pub(crate) fn ledger_hash(&self, prefix: &ChainKey, text: &str) -> [u8; 32] {
        let m = self.message_hash(text);
        self.hash(5, &[&prefix.0, &m])
    }

    /// The chain of a conversation: `[key_0, key_1, …, key_n]` (n + 1 keys for n messages).
    pub fn chain(&self, messages: &[(Role, &str)]) -> Vec<ChainKey> {
        let mut out = Vec::with_capacity(messages.len() + 1);
        let mut k = self.root();
        out.push(k);
        for (role, text) in messages {
            k = self.next(&k, *role, text);
            out.push(k);
        }
        out
    }
}

/// A stable byte per role (not the enum discriminant, so reordering `Role` cannot change keys).
fn role_byte(role: Role) -> u8 {
    match role {
        Role::System => b's',
        Role::Developer => b'd',
        Role::User => b'u',
        Role::Tool => b't',
        Role::Retrieved => b'r',
        Role::Assistant => b'a',
    }
}

/// The normalization under the message hash and the fingerprint: Unicode NFKC, lowercase,
/// every run of whitespace collapsed to one space, leading and trailing whitespace dropped.
/// So `"Hello\n  World "` and `"hello world"` give the same key.
pub fn normalize(text: &str) -> String {
    let folded: String = text.nfkc().collect::<String>().to_lowercase();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}
