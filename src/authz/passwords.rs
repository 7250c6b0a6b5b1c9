//! Local users' passwords (`login = "local"`): Argon2id verification off the
//! async threads, bounded. Each verification costs ~20 ms of CPU and the hash's
//! memory (19 MiB with `eragate hash-password`'s parameters), so at most one per
//! CPU runs at once (the rest wait, first come first served), and one client
//! network has at most [`PER_NETWORK`] waiting or running (the sign-in asks for a
//! [`Turn`]; without one it is answered "busy" at once): a flood of guesses from
//! one address can neither exhaust memory nor push everybody else's sign-in to
//! the back of a long queue. An unknown user costs what a wrong password costs;
//! an empty password is wrong without being checked.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

/// Most verifications of one client network waiting or running at once.
pub(crate) const PER_NETWORK: u32 = 2;

/// An Argon2id hash (of a random password) checked for unknown users, so that
/// they cost the same as a wrong password.
const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$n3pyVvYqK9F4D3Hb4n8v3QhS0kF6rvU3Vgq5l3b8r1Y";

/// Local users and the verifications under way.
pub(crate) struct Passwords {
    /// Name → Argon2id PHC string.
    users: HashMap<String, String>,
    permits: Arc<Semaphore>,
    per_network: Mutex<HashMap<IpAddr, u32>>,
}

/// A client network's turn to have one password checked; its place is given
/// back when dropped.
pub(crate) struct Turn<'a> {
    passwords: &'a Passwords,
    network: Option<IpAddr>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let Some(network) = self.network else { return };
        let mut map = self.passwords.per_network.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = map.get_mut(&network) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                map.remove(&network);
            }
        }
    }
}

impl Turn<'_> {
    /// Whether `password` is `username`'s (an unknown user costs what a wrong
    /// password costs; the empty password is wrong unchecked).
    pub(crate) async fn check(self, username: &str, password: &str) -> bool {
        if password.is_empty() {
            return false;
        }
        let (known, hash) = match self.passwords.users.get(username) {
            Some(hash) => (true, hash.clone()),
            None => (false, DUMMY.to_owned()),
        };
        let Ok(_permit) = self.passwords.permits.clone().acquire_owned().await else {
            return false;
        };
        let password = password.to_owned();
        let verified = tokio::task::spawn_blocking(move || verify_argon2(&hash, &password))
            .await
            .unwrap_or(false);
        known && verified
    }
}

impl Passwords {
    /// The users `users` names (name, hash), checked at most one per CPU at once.
    pub(crate) fn new(users: impl IntoIterator<Item = (String, String)>) -> Passwords {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Passwords {
            users: users.into_iter().collect(),
            permits: Arc::new(Semaphore::new(cpus)),
            per_network: Mutex::new(HashMap::new()),
        }
    }

    /// A turn for a client of `network` (`None`: unknown, never held back), unless
    /// [`PER_NETWORK`] of its checks are under way.
    pub(crate) fn turn(&self, network: Option<IpAddr>) -> Option<Turn<'_>> {
        if let Some(network) = network {
            let mut map = self.per_network.lock().unwrap_or_else(|e| e.into_inner());
            let count = map.entry(network).or_insert(0);
            if *count >= PER_NETWORK {
                return None;
            }
            *count += 1;
        }
        Some(Turn {
            passwords: self,
            network,
        })
    }
}

/// Whether `password` matches the Argon2 PHC string `hash` (never the empty password).
pub(crate) fn verify_argon2(hash: &str, password: &str) -> bool {
    use argon2::PasswordVerifier;
    if password.is_empty() {
        return false;
    }
    let Ok(parsed) = argon2::PasswordHash::new(hash) else {
        return false;
    };
    argon2::Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    #[test]
    fn the_dummy_hash_is_a_real_one_with_the_default_parameters() {
        // Were it unparsable, an unknown user would be answered without the cost of a
        // verification, telling them apart from known ones.
        let parsed = argon2::PasswordHash::new(DUMMY).expect("a PHC string");
        let params = argon2::Params::try_from(&parsed).expect("Argon2 parameters");
        let default = argon2::Params::default();
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (default.m_cost(), default.t_cost(), default.p_cost())
        );
    }

    /// A hash of `password`, made here: `hash_password` refuses the empty one.
    fn hash(password: &str) -> String {
        use argon2::PasswordHasher;
        argon2::Argon2::default()
            .hash_password(password.as_bytes())
            .expect("a hash")
            .to_string()
    }

    #[test]
    fn empty_passwords_never_match_and_busy_networks_are_not_checked() {
        let empty = hash("");
        let full = hash("secret");
        let passwords = Passwords::new([("e".to_owned(), empty.clone()), ("f".to_owned(), full)]);
        let net: Option<IpAddr> = Some("10.0.0.1".parse().expect("ip"));
        // (user, password, right)
        let cases = [
            ("e", "", false),
            ("f", "secret", true),
            ("f", "", false),
            ("f", "Secret", false),
            ("nobody", "secret", false),
        ];
        for (user, password, right) in cases {
            let turn = passwords.turn(net).expect("a turn");
            assert_eq!(block_on(turn.check(user, password)), right, "{user}:{password}");
        }
        assert!(!verify_argon2(&empty, ""), "the empty password never verifies");
        let network = Some("10.0.0.2".parse().expect("ip"));
        let held: Vec<_> = (0..PER_NETWORK)
            .map(|_| passwords.turn(network).expect("a turn"))
            .collect();
        assert!(passwords.turn(network).is_none(), "busy");
        assert!(passwords.turn(net).is_some(), "another network is not");
        assert!(passwords.turn(None).is_some(), "nor an unknown one");
        drop(held);
        assert!(passwords.turn(network).is_some());
    }
}
