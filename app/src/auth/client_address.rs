//! Who a request comes from, behind reverse proxies (pure). The sign-in backoff and the
//! audit log key on the client's address; behind a proxy the connection's peer is the
//! proxy, so every client would share one backoff and the log would name the proxy.
//!
//! `X-Forwarded-For` and `Forwarded: for=` are believed only when the peer is one of the
//! configured `trusted_proxies` (off by default: anyone can send those headers). Then the
//! hops are read from the right (the nearest proxy's report) and proxies we trust are
//! skipped: the first address that is not one of ours is the client, since everything to
//! its left was written by the client or by proxies we do not know. A hop we cannot read
//! (`unknown`, an obfuscated name, garbage) ends the walk at the last address we could.

use std::net::IpAddr;

/// The client address a request was resolved to, left in the request's extensions by the
/// server's `client_address` layer for server functions (`functions::ssr::source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// One trusted address or network: `10.0.0.0/8`, `192.0.2.7`, `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    pub fn parse(text: &str) -> Result<Network, String> {
        let text = text.trim();
        let bad = || format!("`{text}` is not an IP address or network (such as 10.0.0.0/8, 192.0.2.7 or fd00::/8)");
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().map_err(|_| bad())?, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (text.parse::<IpAddr>().map_err(|_| bad())?, None),
        };
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(bits);
        if prefix > bits {
            return Err(bad());
        }
        Ok(Network { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u32::from(net).into(), self.prefix, 32) == masked(u32::from(ip).into(), self.prefix, 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), self.prefix, 128) == masked(u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

fn masked(bits: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let keep = u32::from(width - prefix);
    (bits >> keep) << keep
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bits = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == bits {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// The proxies whose forwarding headers are believed. Empty (the default): none are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<Network>);

impl TrustedProxies {
    /// Reads a list of addresses and networks; the error names the first one that is wrong.
    pub fn parse<S: AsRef<str>>(list: &[S]) -> Result<TrustedProxies, String> {
        let mut nets = Vec::new();
        for item in list.iter().map(AsRef::as_ref).filter(|s| !s.trim().is_empty()) {
            nets.push(Network::parse(item).map_err(|e| format!("trusted_proxies: {e}"))?);
        }
        Ok(TrustedProxies(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(ip))
    }

    /// For the startup banner: "off" or the list.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            "off (forwarding headers ignored)".into()
        } else {
            self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        }
    }

    /// The client of a request whose connection came from `peer`, given the values of its
    /// `Forwarded` headers and of its `X-Forwarded-For` headers, in the order they came.
    /// `Forwarded` wins when it names any hop (it is the standard one).
    pub fn client<'a>(
        &self,
        peer: IpAddr,
        forwarded: impl IntoIterator<Item = &'a str>,
        x_forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut hops: Vec<&str> =
            forwarded.into_iter().flat_map(|line| line.split(',')).filter_map(forwarded_for).collect();
        if hops.is_empty() {
            hops = x_forwarded_for
                .into_iter()
                .flat_map(|line| line.split(','))
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .collect();
        }
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = hop_address(hop) else { return client };
            client = ip;
            if !self.trusts(ip) {
                return ip;
            }
        }
        client
    }
}

/// The `for=` of one `Forwarded` element (`for=192.0.2.60;proto=http;by=203.0.113.43`).
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        key.trim().eq_ignore_ascii_case("for").then_some(value.trim())
    })
}

/// A hop as proxies write it: `192.0.2.43`, `"192.0.2.43:47011"`, `"[2001:db8::17]:4711"`,
/// `2001:db8::17`; `None` for `unknown`, an obfuscated name or anything else.
fn hop_address(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim().trim_matches('"');
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split_once(']').and_then(|(ip, _)| ip.parse().ok());
    }
    let (ip, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(list).unwrap()
    }

    #[test]
    fn networks_parse_and_contain() {
        let net = Network::parse("10.0.0.0/8").unwrap();
        assert!(net.contains(ip("10.200.3.4")) && !net.contains(ip("11.0.0.1")));
        assert!(net.contains(ip("::ffff:10.1.2.3")), "IPv4 mapped into IPv6");
        assert!(Network::parse("192.0.2.7").unwrap().contains(ip("192.0.2.7")));
        assert!(!Network::parse("192.0.2.7").unwrap().contains(ip("192.0.2.8")));
        assert!(Network::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
        assert!(Network::parse("0.0.0.0/0").unwrap().contains(ip("203.0.113.1")));
        assert_eq!(Network::parse("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        for bad in ["10.0.0.0/33", "proxy.internal", "10.0.0/8", "::/129", ""] {
            assert!(Network::parse(bad).is_err(), "{bad}");
        }
        let err = TrustedProxies::parse(&["10.0.0.0/8", "nope"]).unwrap_err();
        assert!(err.contains("`nope`"), "{err}");
    }

    #[test]
    fn off_by_default_the_headers_are_ignored() {
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.5"), ["for=198.51.100.7"], ["198.51.100.7"]), ip("10.0.0.5"));
        assert_eq!(none.describe(), "off (forwarding headers ignored)");
    }

    #[test]
    fn only_a_trusted_peer_is_believed_and_the_rightmost_untrusted_hop_is_the_client() {
        let ours = proxies(&["10.0.0.0/8"]);
        let none: [&str; 0] = [];
        // Straight from the internet: whatever it claims, the peer is the client.
        assert_eq!(ours.client(ip("203.0.113.9"), none, ["198.51.100.7"]), ip("203.0.113.9"));
        // Through our proxy.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["198.51.100.7"]), ip("198.51.100.7"));
        // A client that sends its own header cannot choose its address: the proxy appended the real one.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["1.1.1.1, 198.51.100.7"]), ip("198.51.100.7"));
        // Two of our proxies in a row, one header line each.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["1.1.1.1, 198.51.100.7", "10.9.9.9"]), ip("198.51.100.7"));
        // Only our proxies: the left-most is as far as we can see.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["10.1.1.1, 10.2.2.2"]), ip("10.1.1.1"));
        // No header at all.
        assert_eq!(ours.client(ip("10.0.0.5"), none, none), ip("10.0.0.5"));
        // An unreadable hop stops the walk at the last address we could read.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["198.51.100.7, unknown"]), ip("10.0.0.5"));
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["garbage, 10.3.3.3"]), ip("10.3.3.3"));
        // Ports and brackets as proxies write them.
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["198.51.100.7:4711"]), ip("198.51.100.7"));
        assert_eq!(ours.client(ip("10.0.0.5"), none, ["[2001:db8::17]:4711"]), ip("2001:db8::17"));
    }

    #[test]
    fn the_standard_forwarded_header_wins() {
        let ours = proxies(&["10.0.0.0/8", "::1"]);
        let forwarded = ["for=1.1.1.1, for=\"[2001:db8:cafe::17]:4711\";proto=https", "For=10.4.4.4;by=10.0.0.5"];
        assert_eq!(ours.client(ip("::1"), forwarded, ["198.51.100.9"]), ip("2001:db8:cafe::17"));
        assert_eq!(ours.client(ip("10.0.0.5"), ["proto=https;for=192.0.2.60"], ["198.51.100.9"]), ip("192.0.2.60"));
        // A Forwarded header without `for=` leaves X-Forwarded-For to speak.
        assert_eq!(ours.client(ip("10.0.0.5"), ["proto=https"], ["198.51.100.9"]), ip("198.51.100.9"));
        assert_eq!(ours.client(ip("10.0.0.5"), ["for=unknown"], ["198.51.100.9"]), ip("10.0.0.5"));
    }
}
