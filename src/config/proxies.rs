//! `[listen] trusted_proxies` and `client_ip_header`: which peers' forwarding
//! headers are believed, and the client address a request stands for.
//!
//! A connection whose TCP peer is not in the list is its own client, whatever
//! headers it sends. A connection from a listed proxy carries the client's address
//! in the named header (`X-Forwarded-For`, or RFC 7239 `Forwarded: for=`): the
//! entries are read from the right (the hop nearest eragate) and the first one
//! that is not itself a listed proxy is the client. Every entry left of it was
//! written by a party nobody vouches for, so none of them is read. A header that
//! is absent, or whose entry at that place cannot be read as an address, leaves
//! the last trusted hop as the client (never a guess).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::HeaderMap;
use serde::Deserialize;

/// An address range: an address and how many leading bits of it count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    /// `ADDRESS` or `ADDRESS/PREFIX` (IPv4 or IPv6); the address's bits past the
    /// prefix must be zero, so that a range is written one way only.
    pub(crate) fn parse(text: &str) -> Result<Network, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or a range (ADDRESS/BITS)"))?;
        let bits = match address {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix = match prefix {
            None => bits,
            Some(prefix) => prefix
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(|| format!("{text:?}: the prefix length must be a number from 0 to {bits}"))?,
        };
        // An IPv4-mapped range is its IPv4 range (peers are compared as IPv4).
        let (address, prefix) = match address {
            IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => (address.to_canonical(), prefix - 96),
            _ => (address, prefix),
        };
        let network = Network { address, prefix };
        let masked = network.masked(address);
        if masked != address {
            return Err(format!(
                "{text:?} has bits set past its /{prefix}: write {masked}/{prefix}"
            ));
        }
        Ok(network)
    }

    /// Whether `ip` is in this range (an IPv4-mapped IPv6 address as its IPv4 one).
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self.address, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => self.masked(ip) == self.address,
            _ => false,
        }
    }

    /// `ip` with the bits past this range's prefix cleared.
    fn masked(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// The forwarding header a trusted proxy writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) enum ClientIpHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, most ingresses).
    #[default]
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    #[serde(rename = "forwarded")]
    Forwarded,
}

/// `[listen] trusted_proxies`: the peers whose forwarding header is believed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrustedProxies(Vec<Network>);

impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Vec::<String>::deserialize(deserializer)?;
        entries
            .iter()
            .map(|entry| Network::parse(entry))
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
            .map_err(serde::de::Error::custom)
    }
}

impl TrustedProxies {
    /// The ranges `entries` name (`ADDRESS` or `ADDRESS/BITS` each).
    #[cfg(test)]
    pub(crate) fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, String> {
        entries
            .iter()
            .map(|e| Network::parse(e.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    /// Whether `ip` is a trusted proxy.
    pub(crate) fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(ip))
    }

    /// The client a request from `peer` with `headers` stands for (see the module's doc).
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap, header: ClientIpHeader) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.trusts(client) {
            return client;
        }
        let name = match header {
            ClientIpHeader::XForwardedFor => "x-forwarded-for",
            ClientIpHeader::Forwarded => "forwarded",
        };
        // Several header lines are one list, in order (RFC 9110 §5.3).
        let values: Vec<&str> = headers.get_all(name).iter().map(|v| v.to_str().unwrap_or("")).collect();
        for entry in values.iter().rev().flat_map(|v| v.rsplit(',')) {
            let address = match header {
                ClientIpHeader::XForwardedFor => node_address(entry),
                ClientIpHeader::Forwarded => forwarded_for(entry).and_then(node_address),
            };
            let Some(address) = address else {
                // Unreadable ("unknown", an obfuscated node, garbage): the hop that
                // wrote it is the last one anybody vouches for.
                return client;
            };
            client = address;
            if !self.trusts(address) {
                return address;
            }
        }
        client
    }
}

/// The `for=` parameter of one `Forwarded` element (`for=1.2.3.4;proto=https`).
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value.trim())
    })
}

/// The address of a node: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]:80`,
/// optionally quoted (RFC 7239 quotes IPv6 nodes).
fn node_address(node: &str) -> Option<IpAddr> {
    let node = node.trim().trim_matches('"');
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let host = match node.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.0,
        None => node.rsplit_once(':')?.0,
    };
    host.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn ranges_parse_or_say_why_not() {
        let cases = [
            ("10.0.0.0/8", Some(("10.1.2.3", true))),
            ("10.0.0.0/8", Some(("11.0.0.1", false))),
            ("192.168.1.7", Some(("192.168.1.7", true))),
            ("192.168.1.7", Some(("192.168.1.8", false))),
            ("0.0.0.0/0", Some(("203.0.113.1", true))),
            ("2001:db8::/32", Some(("2001:db8:1::1", true))),
            ("2001:db8::/32", Some(("10.0.0.1", false))),
            ("127.0.0.1", Some(("::ffff:127.0.0.1", true))),
            ("::ffff:10.0.0.0/104", Some(("10.0.0.1", true))),
            ("::ffff:10.0.0.0/104", Some(("11.0.0.1", false))),
            ("10.0.0.1/8", None),
            ("10.0.0.0/33", None),
            ("10.0.0.0/x", None),
            ("example.com", None),
            ("", None),
        ];
        for (text, expected) in cases {
            let parsed = Network::parse(text);
            match expected {
                None => assert!(parsed.is_err(), "{text}: {parsed:?}"),
                Some((address, inside)) => {
                    let network = parsed.unwrap_or_else(|e| panic!("{text}: {e}"));
                    assert_eq!(network.contains(ip(address)), inside, "{text} ∋ {address}");
                }
            }
        }
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_from_the_right() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).expect("proxies");
        let xff = ClientIpHeader::XForwardedFor;
        let fwd = ClientIpHeader::Forwarded;
        // (peer, header, its lines, the client)
        let cases: Vec<(&str, ClientIpHeader, Vec<&str>, &str)> = vec![
            // An untrusted peer is the client, whatever it claims.
            ("203.0.113.9", xff, vec!["198.51.100.1"], "203.0.113.9"),
            // A trusted peer's header names the client…
            ("10.0.0.2", xff, vec!["198.51.100.1"], "198.51.100.1"),
            // …read from the right: what the client wrote itself is left of it.
            ("10.0.0.2", xff, vec!["1.1.1.1, 198.51.100.1"], "198.51.100.1"),
            ("10.0.0.2", xff, vec!["1.1.1.1, 198.51.100.1, 10.0.0.7"], "198.51.100.1"),
            ("10.0.0.2", xff, vec!["1.1.1.1", "198.51.100.1"], "198.51.100.1"),
            // Ports and brackets.
            ("10.0.0.2", xff, vec!["198.51.100.1:5555"], "198.51.100.1"),
            ("10.0.0.2", xff, vec!["[2001:db8::7]:443"], "2001:db8::7"),
            // Unreadable, absent or all trusted: the last trusted hop.
            ("10.0.0.2", xff, vec!["unknown"], "10.0.0.2"),
            ("10.0.0.2", xff, vec!["1.1.1.1, garbage, 10.0.0.7"], "10.0.0.7"),
            ("10.0.0.2", xff, vec![], "10.0.0.2"),
            ("127.0.0.1", xff, vec!["10.0.0.5"], "10.0.0.5"),
            // RFC 7239.
            (
                "10.0.0.2",
                fwd,
                vec!["for=1.1.1.1, for=198.51.100.1;proto=https"],
                "198.51.100.1",
            ),
            ("10.0.0.2", fwd, vec!["For=\"[2001:db8::7]:80\""], "2001:db8::7"),
            ("10.0.0.2", fwd, vec!["for=_hidden"], "10.0.0.2"),
            // The header not named is not read.
            ("10.0.0.2", fwd, vec![], "10.0.0.2"),
        ];
        for (peer, header, lines, client) in cases {
            let mut headers = HeaderMap::new();
            let name = match header {
                ClientIpHeader::XForwardedFor => "x-forwarded-for",
                ClientIpHeader::Forwarded => "forwarded",
            };
            for line in &lines {
                headers.append(name, line.parse().expect("a header value"));
            }
            // The other header is present too, and never read.
            headers.append(
                match header {
                    ClientIpHeader::XForwardedFor => "forwarded",
                    ClientIpHeader::Forwarded => "x-forwarded-for",
                },
                "for=9.9.9.9".parse().expect("a header value"),
            );
            assert_eq!(
                proxies.client(ip(peer), &headers, header),
                ip(client),
                "{peer} {lines:?}"
            );
        }
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.2"), &HeaderMap::new(), xff),
            ip("10.0.0.2")
        );
    }
}
