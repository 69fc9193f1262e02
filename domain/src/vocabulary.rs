//! `vocabulary!`: a closed set of words stored as text and shown to people (terminal
//! reasons, triggers, roles...): an enum with `as_str`, `parse`, `ALL`, serde and
//! `Display`, the stored text written once per word. Its own module because the canonical
//! model, pricing and the domain modules all define vocabularies.

#[allow(unused_imports)]
use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the canonical spelling, ignoring case and surrounding space.
            pub fn parse(text: &str) -> Option<$name> {
                let text = text.trim();
                $name::ALL.iter().copied().find(|v| v.as_str().eq_ignore_ascii_case(text))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use vocabulary;
