//! The catalog: everything a server offers (tools, resources, resource
//! templates, prompts, completions), grouped by **source**.
//!
//! A source is whoever supplies a set of entries: the local builder
//! (`Server`), the daemon's command tools, one upstream server of the
//! gateway. A source is replaced or withdrawn as a whole, atomically: a
//! reader sees either the old entries or the new ones, never a mix, and the
//! engine sends one `notifications/*/list_changed` per kind whose listing
//! actually changed.
//!
//! Entries are trait objects that speak JSON: a definition as the list shows
//! it, and a call that returns the whole result object. The engine adds
//! nothing and removes nothing, so a proxied entry passes its schema, its
//! unknown members and its `_meta` through untouched. Schema validation and
//! typed results are what the `Server` builders add on top.
//!
//! When two sources offer the same name (or URI), the source whose id sorts
//! first wins, whatever the order the sources arrived in; the clash is
//! logged when either side changes.

use super::context::Context;
use super::tasks::TaskSupport;
use crate::jsonrpc::ErrorObject;
use crate::model::skill::Skill;
use crate::model::{Answer, CompletionRef, CompletionRequest};
use crate::sync::{lock, read, write};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};

/// A tool: its definition and its call.
pub trait ToolEntry: Send + Sync {
    /// The definition as `tools/list` shows it; it must hold a string `name`.
    fn definition(&self) -> &Value;
    /// Runs the tool. `arguments` is the request's `arguments` object (`{}`
    /// when absent), handed over; the answer is the whole `CallToolResult`
    /// (as JSON, or typed: [`Answer::Tool`]).
    fn call(&self, arguments: Value, ctx: &Context) -> Result<Answer, ErrorObject>;
    /// Whether its calls may run as tasks (default: never).
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Forbidden
    }
    /// Whether its handler makes the call a task itself, with
    /// [`Context::detach`], rather than running as one from the start
    /// (default: no).
    fn detaches_itself(&self) -> bool {
        false
    }
    /// Whether its calls run on the thread that read them, not on the
    /// handler pool (default: no). See `Tool::quick` for what it must keep to.
    fn is_quick(&self) -> bool {
        false
    }
}

/// A resource with a fixed URI.
pub trait ResourceEntry: Send + Sync {
    /// The definition as `resources/list` shows it; it must hold a string `uri`.
    fn definition(&self) -> &Value;
    /// Reads it; the answer is the whole `ReadResourceResult`.
    fn read(&self, uri: &str, ctx: &Context) -> Result<Value, ErrorObject>;
}

/// A family of resources named by a URI template.
pub trait TemplateEntry: Send + Sync {
    /// The definition as `resources/templates/list` shows it; it must hold
    /// a string `uriTemplate`.
    fn definition(&self) -> &Value;
    /// Whether `uri` belongs to this template.
    fn matches(&self, uri: &str) -> bool;
    /// Reads `uri` (one that [`TemplateEntry::matches`]); the whole `ReadResourceResult`.
    fn read(&self, uri: &str, ctx: &Context) -> Result<Value, ErrorObject>;
}

/// A prompt.
pub trait PromptEntry: Send + Sync {
    /// The definition as `prompts/list` shows it; it must hold a string `name`.
    fn definition(&self) -> &Value;
    /// Renders it. `arguments` is the request's `arguments` object, every
    /// value a string (`{}` when absent); the answer is the whole `GetPromptResult`.
    fn get(&self, arguments: &Value, ctx: &Context) -> Result<Value, ErrorObject>;
}

/// Completions for one prompt's arguments or one template's variables.
pub trait CompletionEntry: Send + Sync {
    /// Completes; the answer is the whole `CompleteResult` (`{"completion": ...}`).
    fn complete(
        &self,
        reference: &CompletionRef,
        request: &CompletionRequest,
        ctx: &Context,
    ) -> Result<Value, ErrorObject>;
}

/// Serves requests whose method the engine does not know (custom methods).
/// Run on the handler pool like any call.
pub trait MethodFallback: Send + Sync {
    /// Answers `method`, or `Err(ErrorObject::method_not_found(method))`.
    fn handle(
        &self,
        method: &str,
        params: Option<&Map<String, Value>>,
        ctx: &Context,
    ) -> Result<Value, ErrorObject>;
}

/// The entries of one source.
#[derive(Clone, Default)]
pub struct Source {
    pub(crate) tools: Vec<Arc<dyn ToolEntry>>,
    pub(crate) resources: Vec<Arc<dyn ResourceEntry>>,
    pub(crate) templates: Vec<Arc<dyn TemplateEntry>>,
    pub(crate) readers: Vec<Arc<dyn TemplateEntry>>,
    pub(crate) prompts: Vec<Arc<dyn PromptEntry>>,
    pub(crate) completions: Vec<(CompletionRef, Arc<dyn CompletionEntry>)>,
    pub(crate) skills: Vec<Arc<Skill>>,
}

impl Source {
    /// A source with no entries.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a tool.
    pub fn tool(mut self, tool: Arc<dyn ToolEntry>) -> Self {
        self.tools.push(tool);
        self
    }
    /// Adds a resource.
    pub fn resource(mut self, resource: Arc<dyn ResourceEntry>) -> Self {
        self.resources.push(resource);
        self
    }
    /// Adds a resource template.
    pub fn template(mut self, template: Arc<dyn TemplateEntry>) -> Self {
        self.templates.push(template);
        self
    }
    /// Adds a reader: like a template, it reads the URIs it matches that
    /// no resource or template does, but it is not listed (its
    /// definition is never asked for). A gateway reads an upstream's
    /// unlisted resources through one.
    pub fn reader(mut self, reader: Arc<dyn TemplateEntry>) -> Self {
        self.readers.push(reader);
        self
    }
    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Arc<dyn PromptEntry>) -> Self {
        self.prompts.push(prompt);
        self
    }
    /// Adds a completion provider for `reference`.
    pub fn completion(mut self, reference: CompletionRef, entry: Arc<dyn CompletionEntry>) -> Self {
        self.completions.push((reference, entry));
        self
    }
    /// Adds a skill's entry (`skills/list`); its files are resources of
    /// the same source.
    pub fn skill(mut self, skill: Arc<Skill>) -> Self {
        self.skills.push(skill);
        self
    }
    /// Whether it offers nothing.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.resources.is_empty()
            && self.templates.is_empty()
            && self.readers.is_empty()
            && self.prompts.is_empty()
            && self.completions.is_empty()
    }
}

/// Why a source was refused; nothing changed.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogError(pub String);

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CatalogError {}

/// Which lists changed, for `notifications/*/list_changed`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// tools
    Tools,
    /// resources and resource templates
    Resources,
    /// prompts
    Prompts,
}

impl ListKind {
    pub(crate) const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Resources, ListKind::Prompts];

    /// The server capability that declares the list.
    pub(crate) fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::Prompts => "prompts",
        }
    }

    pub(crate) fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// Which lists a change touched.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// `tools/list` answers differently.
    pub tools: bool,
    /// `resources/list` or `resources/templates/list` answers differently.
    pub resources: bool,
    /// `prompts/list` answers differently.
    pub prompts: bool,
}

impl Changes {
    /// The kinds that changed, in a fixed order.
    pub fn kinds(&self) -> impl Iterator<Item = ListKind> {
        [
            (self.tools, ListKind::Tools),
            (self.resources, ListKind::Resources),
            (self.prompts, ListKind::Prompts),
        ]
        .into_iter()
        .filter_map(|(on, k)| on.then_some(k))
    }
}

/// Which kinds the server advertises even while it offers none yet (so that
/// entries added later reach clients through `list_changed`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Enabled {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
    pub(crate) completions: bool,
}

/// An entry with its key and its definition, taken once when its source
/// is accepted (outside any lock: `definition` is the entry's own code).
pub(crate) struct Listed<T: ?Sized> {
    pub(crate) key: String,
    pub(crate) definition: Value,
    pub(crate) entry: Arc<T>,
}

type Listing<T> = BTreeMap<String, Arc<Listed<T>>>;

/// The merged, read-only view the engine answers from: every source's
/// entries by key. Replaced as a whole on each change.
#[derive(Default)]
pub(crate) struct View {
    pub(crate) tools: Listing<dyn ToolEntry>,
    pub(crate) resources: Listing<dyn ResourceEntry>,
    pub(crate) templates: Listing<dyn TemplateEntry>,
    /// Unlisted readers, in the order of their sources ([`Source::reader`]).
    pub(crate) readers: Vec<Arc<dyn TemplateEntry>>,
    pub(crate) prompts: Listing<dyn PromptEntry>,
    pub(crate) completions: HashMap<CompletionRef, Arc<dyn CompletionEntry>>,
    /// Skills by the URI of their `SKILL.md`.
    pub(crate) skills: BTreeMap<String, Arc<Skill>>,
}

/// A source with every entry's key and definition taken.
struct Prepared {
    source: Source,
    tools: Vec<Arc<Listed<dyn ToolEntry>>>,
    resources: Vec<Arc<Listed<dyn ResourceEntry>>>,
    templates: Vec<Arc<Listed<dyn TemplateEntry>>>,
    prompts: Vec<Arc<Listed<dyn PromptEntry>>>,
}

/// The key member and the name of each kind, for keys and messages.
const TOOL: (&str, &str) = ("name", "tool");
const RESOURCE: (&str, &str) = ("uri", "resource");
const TEMPLATE: (&str, &str) = ("uriTemplate", "resource template");
const PROMPT: (&str, &str) = ("name", "prompt");

/// The string `member` of a definition: its name or URI.
pub(crate) fn key_of(definition: &Value, member: &str) -> Option<String> {
    definition
        .get(member)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn listed<T: ?Sized>(
    entries: &[Arc<T>],
    definition: impl Fn(&T) -> &Value,
    (member, kind): (&str, &str),
) -> Result<Vec<Arc<Listed<T>>>, CatalogError> {
    entries
        .iter()
        .map(|e| {
            let definition = definition(e).clone();
            let key = key_of(&definition, member).ok_or_else(|| {
                CatalogError(format!(
                    "a {kind} definition must hold a string {member:?}: {definition}"
                ))
            })?;
            Ok(Arc::new(Listed {
                key,
                definition,
                entry: e.clone(),
            }))
        })
        .collect()
}

impl Prepared {
    fn new(source: Source) -> Result<Prepared, CatalogError> {
        Ok(Prepared {
            tools: listed(&source.tools, |e| e.definition(), TOOL)?,
            resources: listed(&source.resources, |e| e.definition(), RESOURCE)?,
            templates: listed(&source.templates, |e| e.definition(), TEMPLATE)?,
            prompts: listed(&source.prompts, |e| e.definition(), PROMPT)?,
            source,
        })
    }
}

/// Merges `entries` of `source` into `into`; earlier sources keep a clashing key.
fn merge<T: ?Sized>(
    into: &mut BTreeMap<String, (Arc<Listed<T>>, String)>,
    entries: &[Arc<Listed<T>>],
    source: &str,
    changed: &str,
    kind: &str,
) {
    for e in entries {
        match into.get(&e.key) {
            Some((_, owner)) if owner != source => {
                if source == changed || owner == changed {
                    log::warn!(
                        "catalog: {kind} {:?} of source {source:?} is hidden by source {owner:?}",
                        e.key
                    );
                }
            }
            // Within one source, the later entry replaces the earlier.
            _ => {
                into.insert(e.key.clone(), (e.clone(), source.to_owned()));
            }
        }
    }
}

fn strip<T: ?Sized>(m: BTreeMap<String, (Arc<Listed<T>>, String)>) -> Listing<T> {
    m.into_iter().map(|(k, (e, _))| (k, e)).collect()
}

/// Whether two listings answer the same (same keys, same definitions).
fn same<T: ?Sized>(a: &Listing<T>, b: &Listing<T>) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, ea), (kb, eb))| {
            ka == kb && (Arc::ptr_eq(ea, eb) || ea.definition == eb.definition)
        })
}

fn build(sources: &BTreeMap<String, Arc<Prepared>>, changed: &str) -> View {
    let (mut tools, mut resources, mut templates, mut prompts) = (
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    );
    let mut completions = HashMap::new();
    let mut skills = BTreeMap::new();
    let mut readers = Vec::new();
    for (id, s) in sources {
        readers.extend(s.source.readers.iter().cloned());
        for k in &s.source.skills {
            skills.entry(k.uri.clone()).or_insert_with(|| k.clone());
        }
        merge(&mut tools, &s.tools, id, changed, TOOL.1);
        merge(&mut resources, &s.resources, id, changed, RESOURCE.1);
        merge(&mut templates, &s.templates, id, changed, TEMPLATE.1);
        merge(&mut prompts, &s.prompts, id, changed, PROMPT.1);
        for (r, c) in &s.source.completions {
            completions.entry(r.clone()).or_insert_with(|| c.clone());
        }
    }
    View {
        tools: strip(tools),
        resources: strip(resources),
        templates: strip(templates),
        readers,
        prompts: strip(prompts),
        completions,
        skills,
    }
}

/// Sources and the merged view the engine serves.
#[derive(Default)]
pub(crate) struct Catalog {
    // Held while a change is computed, so changes apply one at a time.
    sources: Mutex<BTreeMap<String, Arc<Prepared>>>,
    view: RwLock<Arc<View>>,
    pub(crate) enabled: Enabled,
    fallback: RwLock<Option<Arc<dyn MethodFallback>>>,
}

impl Catalog {
    pub(crate) fn new(enabled: Enabled) -> Catalog {
        Catalog {
            enabled,
            ..Default::default()
        }
    }

    /// The current view (cheap: one reference count).
    pub(crate) fn view(&self) -> Arc<View> {
        read(&self.view).clone()
    }

    /// Replaces (or adds) the source `id` with `source`, atomically.
    pub(crate) fn replace(&self, id: &str, source: Source) -> Result<Changes, CatalogError> {
        let prepared = Arc::new(Prepared::new(source)?);
        let mut sources = lock(&self.sources);
        sources.insert(id.to_owned(), prepared);
        Ok(self.rebuild(&sources, id))
    }

    /// Removes the source `id` and all its entries.
    pub(crate) fn withdraw(&self, id: &str) -> Changes {
        let mut sources = lock(&self.sources);
        if sources.remove(id).is_none() {
            return Changes::default();
        }
        self.rebuild(&sources, id)
    }

    /// The entries of source `id`, if present.
    pub(crate) fn source(&self, id: &str) -> Option<Source> {
        lock(&self.sources).get(id).map(|p| p.source.clone())
    }

    fn rebuild(&self, sources: &BTreeMap<String, Arc<Prepared>>, changed: &str) -> Changes {
        let new = build(sources, changed);
        let old = self.view();
        let changes = Changes {
            tools: !same(&old.tools, &new.tools),
            resources: !same(&old.resources, &new.resources)
                || !same(&old.templates, &new.templates),
            prompts: !same(&old.prompts, &new.prompts),
        };
        *write(&self.view) = Arc::new(new);
        changes
    }

    pub(crate) fn set_fallback(&self, fallback: Option<Arc<dyn MethodFallback>>) {
        *write(&self.fallback) = fallback;
    }

    pub(crate) fn fallback(&self) -> Option<Arc<dyn MethodFallback>> {
        read(&self.fallback).clone()
    }

    /// Whether the server offers a capability (`tools`, `resources`,
    /// `prompts`, `logging`, `completions`).
    pub(crate) fn has_capability(&self, name: &str) -> bool {
        self.offers(&self.view(), name)
    }

    fn offers(&self, v: &View, name: &str) -> bool {
        match name {
            "tools" => self.enabled.tools || !v.tools.is_empty(),
            "resources" => {
                self.enabled.resources
                    || !v.resources.is_empty()
                    || !v.templates.is_empty()
                    || !v.readers.is_empty()
            }
            "prompts" => self.enabled.prompts || !v.prompts.is_empty(),
            "logging" => true,
            "completions" => self.enabled.completions || !v.completions.is_empty(),
            _ => false,
        }
    }

    /// The `capabilities` object of the initialize result, derived from what
    /// is offered. Every capability is an object, never a boolean.
    pub(crate) fn capabilities(&self) -> Value {
        let all = [
            ("tools", serde_json::json!({"listChanged": true})),
            (
                "resources",
                serde_json::json!({"subscribe": true, "listChanged": true}),
            ),
            ("prompts", serde_json::json!({"listChanged": true})),
            ("logging", serde_json::json!({})),
            ("completions", serde_json::json!({})),
        ];
        let view = self.view();
        Value::Object(
            all.into_iter()
                .filter(|(name, _)| self.offers(&view, name))
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct T(Value);
    impl ToolEntry for T {
        fn definition(&self) -> &Value {
            &self.0
        }
        fn call(&self, _: Value, _: &Context) -> Result<Answer, ErrorObject> {
            Ok(json!({"content": []}).into())
        }
    }
    fn tool(name: &str) -> Arc<dyn ToolEntry> {
        Arc::new(T(json!({"name": name, "inputSchema": {"type": "object"}})))
    }

    #[test]
    fn sources_swap_atomically_and_report_only_real_changes() {
        let c = Catalog::default();
        let ch = c
            .replace("b", Source::new().tool(tool("x")).tool(tool("y")))
            .unwrap();
        assert_eq!(
            ch,
            Changes {
                tools: true,
                ..Default::default()
            }
        );
        // The same definitions again: nothing to announce.
        let ch = c
            .replace("b", Source::new().tool(tool("x")).tool(tool("y")))
            .unwrap();
        assert_eq!(ch, Changes::default());
        // Source "a" sorts first: its "x" hides b's, and the listing keeps one "x".
        c.replace("a", Source::new().tool(tool("x"))).unwrap();
        assert_eq!(c.view().tools.keys().collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(
            c.withdraw("b"),
            Changes {
                tools: true,
                ..Default::default()
            }
        );
        assert_eq!(c.view().tools.keys().collect::<Vec<_>>(), ["x"]);
        assert_eq!(c.withdraw("nope"), Changes::default());
    }

    #[test]
    fn a_definition_without_its_key_is_refused_and_nothing_changes() {
        let c = Catalog::default();
        c.replace("a", Source::new().tool(tool("x"))).unwrap();
        let bad: Arc<dyn ToolEntry> = Arc::new(T(json!({"title": "no name"})));
        let e = c.replace("a", Source::new().tool(bad)).unwrap_err();
        assert!(e.0.contains("\"name\""), "{e}");
        assert!(c.view().tools.contains_key("x"));
    }
}
