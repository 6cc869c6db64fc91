//! Reports: what a layer (or a part of the service around the pipeline, such as the
//! conversation state) records in a decision beyond findings and scores, under a key of its
//! own. Core carries reports without knowing their types: a layer crate defines its report
//! type, implements [`Report`] for it, hands it to the pipeline in
//! [`Detection::report`](crate::Detection::report), and readers look it up by type
//! ([`Reports::get`]). In a decision's JSON each report is a top-level member named by its
//! key (`"judge": {…}`), so a new layer kind adds a report without a change here, and a
//! reader keeps the reports of kinds it does not know.
//!
//! ```
//! use rampart_core::{Decision, Report, Reports};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! struct Toy {
//!     calls: u32,
//! }
//! impl Report for Toy {
//!     const KEY: &'static str = "toy";
//! }
//!
//! let mut reports = Reports::default();
//! reports.insert(&Toy { calls: 2 }).unwrap();
//! assert_eq!(reports.get::<Toy>().unwrap(), Some(Toy { calls: 2 }));
//! assert_eq!(serde_json::to_string(&reports).unwrap(), r#"{"toy":{"calls":2}}"#);
//! ```

use crate::decision::Action;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::any::Any;
use std::fmt;

/// A report type: serializable, and named by the key it travels under in a decision.
///
/// Only [`Report::KEY`] is required. A layer that resolves other layers' deferred bands
/// ([`Detector::resolves_deferred`](crate::Detector::resolves_deferred)) may also record
/// what it changed ([`Report::record_effect`]).
pub trait Report:
    Serialize + DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static
{
    /// The report's key: its member name in a decision's JSON (`"judge"`, `"relational"`,
    /// `"conversation"`). Keys are unique per decision; a later report with the same key
    /// replaces the earlier one.
    const KEY: &'static str;

    /// Called by the pipeline on the report of the layer that resolved deferred bands with
    /// a verdict ([`Detection::resolution`](crate::Detection::resolution)): the decision's
    /// action without that layer (deferred layers with their own verdicts) and with it, both
    /// before the SANITIZE and data-channel adjustments. The default ignores them.
    fn record_effect(&mut self, without: Action, with: Action) {
        let _ = (without, with);
    }
}

/// Why a report could not be stored or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The report did not serialize.
    #[error("report {key:?} does not serialize")]
    Encode {
        /// The report's key.
        key: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The stored report does not read as the asked type (a report of another version).
    #[error("report {key:?} does not read as its type")]
    Decode {
        /// The report's key.
        key: &'static str,
        /// The deserializer's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The object-safe side of [`Report`], for carrying a report from a detector to the
/// pipeline without the pipeline knowing its type.
trait DynReport: fmt::Debug + Send + Sync {
    fn key(&self) -> &'static str;
    /// The report as JSON, checked to read back as its type.
    fn to_value(&self) -> Result<serde_json::Value, ReportError>;
    fn clone_box(&self) -> Box<dyn DynReport>;
    fn as_any(&self) -> &dyn Any;
    fn record_effect(&mut self, without: Action, with: Action);
}

impl<T: Report> DynReport for T {
    fn key(&self) -> &'static str {
        T::KEY
    }

    fn to_value(&self) -> Result<serde_json::Value, ReportError> {
        encode(self)
    }

    fn clone_box(&self) -> Box<dyn DynReport> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn record_effect(&mut self, without: Action, with: Action) {
        Report::record_effect(self, without, with);
    }
}

/// `report` as JSON, checked to read back as `T`, so that a report stored in a decision can
/// always be looked up by its type in the process that stored it.
fn encode<T: Report>(report: &T) -> Result<serde_json::Value, ReportError> {
    let value = serde_json::to_value(report).map_err(|source| ReportError::Encode {
        key: T::KEY,
        source,
    })?;
    T::deserialize(&value).map_err(|source| ReportError::Decode {
        key: T::KEY,
        source,
    })?;
    Ok(value)
}

/// One layer's report as a detector hands it to the pipeline
/// ([`Detection::report`](crate::Detection::report)).
#[derive(Debug)]
pub struct LayerReport(Box<dyn DynReport>);

impl LayerReport {
    /// Wraps a report.
    pub fn new<T: Report>(report: T) -> LayerReport {
        LayerReport(Box::new(report))
    }

    /// The report's key.
    pub fn key(&self) -> &'static str {
        self.0.key()
    }

    /// The report, when it is a `T`.
    pub fn downcast_ref<T: Report>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }

    /// See [`Report::record_effect`].
    pub(crate) fn record_effect(&mut self, without: Action, with: Action) {
        self.0.record_effect(without, with);
    }

    /// The report as JSON.
    pub fn to_value(&self) -> Result<serde_json::Value, ReportError> {
        self.0.to_value()
    }
}

impl Clone for LayerReport {
    fn clone(&self) -> Self {
        LayerReport(self.0.clone_box())
    }
}

impl PartialEq for LayerReport {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.to_value().ok() == other.to_value().ok()
    }
}

/// The reports of a decision, by key, in the order they were added. Serialized as one JSON
/// member per report (the decision flattens them into its own object), and read back from
/// every member the decision does not otherwise know, so reports of kinds a reader does not
/// know are kept as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reports {
    entries: Vec<(String, serde_json::Value)>,
}

impl Reports {
    /// Stores `report` under its key (replacing a report with the same key). Refused when
    /// its JSON does not read back as `T` (a float that is not a number, say), so the
    /// reports of a decision this process made can always be looked up ([`Reports::find`]).
    pub fn insert<T: Report>(&mut self, report: &T) -> Result<(), ReportError> {
        let value = encode(report)?;
        self.insert_value(T::KEY, value);
        Ok(())
    }

    /// Stores a report that a layer handed over.
    pub fn insert_layer(&mut self, report: &LayerReport) -> Result<(), ReportError> {
        let value = report.to_value()?;
        self.insert_value(report.key(), value);
        Ok(())
    }

    fn insert_value(&mut self, key: &str, value: serde_json::Value) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.entries.push((key.to_string(), value)),
        }
    }

    /// The report of type `T`, when the decision has one.
    pub fn get<T: Report>(&self) -> Result<Option<T>, ReportError> {
        self.raw(T::KEY)
            .map(|v| {
                T::deserialize(v).map_err(|source| ReportError::Decode {
                    key: T::KEY,
                    source,
                })
            })
            .transpose()
    }

    /// The report of type `T`, for a decision this process made. Its reports were checked
    /// to read back when they were stored ([`Reports::insert`]), so only a decision read
    /// from elsewhere (written by another version, edited) can hold one that does not; such
    /// a report reads as absent here, and [`Reports::get`] says why.
    pub fn find<T: Report>(&self) -> Option<T> {
        self.get().ok().flatten()
    }

    /// Whether the decision has a report under `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// The report under `key` as JSON.
    pub fn raw(&self, key: &str) -> Option<&serde_json::Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Removes the report of type `T`; whether there was one.
    pub fn remove<T: Report>(&mut self) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| k != T::KEY);
        self.entries.len() != before
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Serialize for Reports {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Reports {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Reports;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of reports by key")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Reports, A::Error> {
                let mut reports = Reports::default();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    // `"key": null` is an absent report, as an `Option` field read it.
                    if !v.is_null() {
                        reports.insert_value(&k, v);
                    }
                }
                Ok(reports)
            }
        }
        deserializer.deserialize_map(V)
    }
}
