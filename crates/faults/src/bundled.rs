//! The ready profiles of `fault-profiles/`, compiled into the binary so that a bare name
//! (`--profile lost-responses`) works from any directory, and [`load`], which takes
//! either such a name or a path to a TOML file.

use super::error::ProfileError;
use super::parse::parse_profile;
use super::profile::Profile;

/// Every bundled profile: (name, TOML text). The name is the file name without `.toml`.
pub const BUNDLED: &[(&str, &str)] = &[
    ("happy", include_str!("../../../fault-profiles/happy.toml")),
    (
        "flaky-network",
        include_str!("../../../fault-profiles/flaky-network.toml"),
    ),
    (
        "lost-responses",
        include_str!("../../../fault-profiles/lost-responses.toml"),
    ),
    (
        "slow-provider",
        include_str!("../../../fault-profiles/slow-provider.toml"),
    ),
    (
        "ambiguous-errors",
        include_str!("../../../fault-profiles/ambiguous-errors.toml"),
    ),
    (
        "outage-window",
        include_str!("../../../fault-profiles/outage-window.toml"),
    ),
    (
        "rate-limited",
        include_str!("../../../fault-profiles/rate-limited.toml"),
    ),
    ("declines", include_str!("../../../fault-profiles/declines.toml")),
    ("key-expiry", include_str!("../../../fault-profiles/key-expiry.toml")),
    ("chaos", include_str!("../../../fault-profiles/chaos.toml")),
    (
        "duplicate-webhooks",
        include_str!("../../../fault-profiles/duplicate-webhooks.toml"),
    ),
];

/// The TOML text of a bundled profile.
pub fn text(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Loads a profile: a bare name picks a bundled one; anything containing `/` or ending in
/// `.toml` is read from that file. Errors are profile errors (an unreadable file or an
/// unknown name included), one line each.
pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
    if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
        let text = std::fs::read_to_string(name_or_path)
            .map_err(|e| ProfileError::whole_source(name_or_path, format!("cannot read the profile: {e}")))?;
        return parse_profile(name_or_path, &text);
    }
    match text(name_or_path) {
        Some(text) => parse_profile(&format!("fault-profiles/{name_or_path}.toml"), text),
        None => {
            let names: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
            let message = format!(
                "unknown profile, expected one of {} or a path to a .toml file",
                names.join(", ")
            );
            Err(ProfileError::whole_source(name_or_path, message))
        }
    }
}

/// Every bundled profile, parsed (in [`BUNDLED`] order).
pub fn all() -> Result<Vec<Profile>, ProfileError> {
    BUNDLED.iter().map(|(name, _)| load(name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_profile_json, FaultEngine};

    #[test]
    fn every_bundled_profile_parses_and_is_named_after_its_file() {
        for (name, text) in BUNDLED {
            let profile = parse_profile(name, text).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")));
            assert_eq!(profile.name, *name);
            assert!(!profile.description.is_empty(), "{name}");
            assert!(text.trim_start().starts_with('#'), "{name} opens with comments");
        }
        assert_eq!(all().unwrap().len(), BUNDLED.len());
    }

    #[test]
    fn bundled_files_on_disk_are_all_bundled() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fault-profiles");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".toml").map(str::to_string))
            .collect();
        on_disk.sort();
        let mut bundled: Vec<String> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
        bundled.sort();
        assert_eq!(on_disk, bundled);
    }

    #[test]
    fn bundled_profiles_round_trip_through_json_and_toml() {
        for profile in all().unwrap() {
            let json = serde_json::to_string(&profile).unwrap();
            assert_eq!(parse_profile_json("json", &json).unwrap(), profile, "{json}");
            let toml = toml::to_string(&profile).unwrap();
            assert_eq!(parse_profile("toml", &toml).unwrap(), profile, "{toml}");
        }
    }

    #[test]
    fn bundled_hangs_stay_bounded() {
        for profile in all().unwrap() {
            for rule in &profile.rules {
                if let crate::Action::Fault(crate::Fault::Hang { hang, .. }) = &rule.action {
                    assert!(hang.as_secs() <= 10, "{}: hang {hang:?}", profile.name);
                }
            }
            let _ = FaultEngine::new(profile);
        }
    }

    #[test]
    fn load_takes_names_and_paths() {
        assert_eq!(load("happy").unwrap().name, "happy");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fault-profiles/chaos.toml");
        assert_eq!(load(path).unwrap().name, "chaos");
        let e = load("nope").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("nope: unknown profile, expected one of happy, flaky-network"),
            "{e}"
        );
        let e = load("/does/not/exist.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/does/not/exist.toml: cannot read the profile: "),
            "{e}"
        );
    }

    #[test]
    fn errors_in_files_name_the_path() {
        let dir = std::env::temp_dir().join(format!("fauxpay-faults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "name = \"bad\"\ndescription = \"\"\nseed = -1\n").unwrap();
        let path = path.to_str().unwrap();
        let e = load(path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{path}:3: seed: expected a non-negative integer, got -1")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
