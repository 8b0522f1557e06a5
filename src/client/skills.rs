//! Skills from a server (the skills extension, SEP-2640): list and fetch
//! their entries, and read their files verified against the entry.

use super::{Client, ClientError};
use crate::model::base64_decode;
use crate::model::skill::{Skill, SKILLS_EXTENSION};
use serde_json::{json, Value};

impl Client {
    /// Whether the server declared the skills extension.
    pub fn serves_skills(&self) -> bool {
        crate::model::declares_extension(self.server_capabilities(), SKILLS_EXTENSION)
    }

    /// `skills/list`, following cursors. An entry that breaks the
    /// extension's rules is left out (and logged). Lists only: no file is
    /// read before a skill is used ([`Client::read_skill_file`]).
    pub fn list_skills(&self) -> Result<Vec<Skill>, ClientError> {
        let entries = self.list_all("skills/list", "skills")?;
        Ok(entries
            .iter()
            .filter_map(|e| match Skill::from_value(e) {
                Ok(s) => Some(s),
                Err(why) => {
                    log::warn!("client: skill {} left out: {why}", e["uri"]);
                    None
                }
            })
            .collect())
    }

    /// `skills/get`: the current entry of the skill whose `SKILL.md` is `uri`.
    pub fn get_skill(&self, uri: &str) -> Result<Skill, ClientError> {
        let r = self.request("skills/get", json!({"uri": uri}))?;
        let skill = Skill::from_value(&r["skill"]).map_err(ClientError::Skill)?;
        if skill.uri != uri {
            return Err(ClientError::Protocol(format!(
                "skills/get for {uri} answered with the skill {}",
                skill.uri
            )));
        }
        Ok(skill)
    }

    /// Reads the file `uri` of `skill` and verifies it against the entry:
    /// listed, of its size and SHA-256 digest, and for `SKILL.md` with the
    /// entry's frontmatter. Content that fails is never returned
    /// ([`ClientError::Skill`]); fetch the entry again before retrying.
    pub fn read_skill_file(&self, skill: &Skill, uri: &str) -> Result<Vec<u8>, ClientError> {
        let r = self.read_resource(uri)?;
        let item = r["contents"]
            .as_array()
            .and_then(|c| c.iter().find(|i| i["uri"] == uri).or_else(|| c.first()))
            .ok_or_else(|| {
                ClientError::Protocol(format!("resources/read of {uri}: no contents"))
            })?;
        let bytes = match (&item["text"], &item["blob"]) {
            (Value::String(t), _) => t.as_bytes().to_vec(),
            (_, Value::String(b)) => base64_decode(b)
                .ok_or_else(|| ClientError::Protocol(format!("{uri}: the blob is not base64")))?,
            _ => {
                return Err(ClientError::Protocol(format!(
                    "{uri}: neither text nor blob"
                )))
            }
        };
        skill.verify(uri, &bytes).map_err(ClientError::Skill)?;
        Ok(bytes)
    }
}
