//! The two static-token principals the auth, quota and rate-limit tests share:
//! alice and bob, with their bearer tokens and the `[[auth.tokens]]` that admit them.

/// alice's bearer token.
pub const ALICE: &str = "alice-token-0123456789";
/// bob's bearer token.
pub const BOB: &str = "bob-token-9876543210";

/// The hex SHA-256 of `token`, as `[[auth.tokens]] sha256` holds it.
pub fn hex_digest(token: &str) -> String {
    eragate::auth::digest_of(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `[[auth.tokens]]` for alice and bob.
pub fn auth_toml() -> String {
    format!(
        "[[auth.tokens]]\nprincipal = \"alice\"\nsha256 = \"{}\"\n\n[[auth.tokens]]\nprincipal = \"bob\"\nsha256 = \"{}\"\n",
        hex_digest(ALICE),
        hex_digest(BOB)
    )
}
