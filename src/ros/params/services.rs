//! The node's parameter services (`rcl_interfaces`: list, get, get types, describe, set, set
//! atomically), answered from [`NodeParams`]. r2r's own handler describes a parameter by its
//! description alone; these give what `ros2 param describe` and rqt show: the description
//! (config/default.yaml's comment, or the node setting's), the integer or floating-point
//! range, the allowed values and the read-only flag, all from the tables validation uses
//! (`config::schema::SPECS`, `settings::NODE_SPECS`).
//!
//! The start-up values (params file, `-p`) are those rcl parsed into the node; `use_sim_time`
//! is returned to the node, which then reads the time from `/clock` (`ros::node`'s
//! `FrameClock`).

use std::sync::{Arc, Mutex};

use futures::future::join_all;
use futures::{Future, FutureExt, StreamExt};
use r2r::rcl_interfaces::msg::{
    FloatingPointRange, IntegerRange, ListParametersResult, ParameterDescriptor,
    ParameterType as T, ParameterValue as Msg, SetParametersResult,
};
use r2r::rcl_interfaces::srv::{
    DescribeParameters, GetParameterTypes, GetParameters, ListParameters, SetParameters,
    SetParametersAtomically,
};
use r2r::{ParameterValue, QosProfile};

use super::NodeParams;
use crate::config::schema::{self, Domain};
use crate::ros::settings::NODE_SPECS;

/// A parameter value as its message.
pub fn to_msg(v: &ParameterValue) -> Msg {
    let mut m = Msg {
        type_: type_of(v),
        ..Default::default()
    };
    match v {
        ParameterValue::NotSet => {}
        ParameterValue::Bool(b) => m.bool_value = *b,
        ParameterValue::Integer(i) => m.integer_value = *i,
        ParameterValue::Double(d) => m.double_value = *d,
        ParameterValue::String(s) => m.string_value = s.clone(),
        ParameterValue::BoolArray(a) => m.bool_array_value = a.clone(),
        ParameterValue::ByteArray(a) => m.byte_array_value = a.clone(),
        ParameterValue::IntegerArray(a) => m.integer_array_value = a.clone(),
        ParameterValue::DoubleArray(a) => m.double_array_value = a.clone(),
        ParameterValue::StringArray(a) => m.string_array_value = a.clone(),
    }
    m
}

/// A parameter message as its value (an unknown type reads as not set).
pub fn from_msg(m: &Msg) -> ParameterValue {
    match m.type_ {
        x if x == T::PARAMETER_BOOL as u8 => ParameterValue::Bool(m.bool_value),
        x if x == T::PARAMETER_INTEGER as u8 => ParameterValue::Integer(m.integer_value),
        x if x == T::PARAMETER_DOUBLE as u8 => ParameterValue::Double(m.double_value),
        x if x == T::PARAMETER_STRING as u8 => ParameterValue::String(m.string_value.clone()),
        x if x == T::PARAMETER_BOOL_ARRAY as u8 => {
            ParameterValue::BoolArray(m.bool_array_value.clone())
        }
        x if x == T::PARAMETER_BYTE_ARRAY as u8 => {
            ParameterValue::ByteArray(m.byte_array_value.clone())
        }
        x if x == T::PARAMETER_INTEGER_ARRAY as u8 => {
            ParameterValue::IntegerArray(m.integer_array_value.clone())
        }
        x if x == T::PARAMETER_DOUBLE_ARRAY as u8 => {
            ParameterValue::DoubleArray(m.double_array_value.clone())
        }
        x if x == T::PARAMETER_STRING_ARRAY as u8 => {
            ParameterValue::StringArray(m.string_array_value.clone())
        }
        _ => ParameterValue::NotSet,
    }
}

fn type_of(v: &ParameterValue) -> u8 {
    match v {
        ParameterValue::NotSet => T::PARAMETER_NOT_SET as u8,
        ParameterValue::Bool(_) => T::PARAMETER_BOOL as u8,
        ParameterValue::Integer(_) => T::PARAMETER_INTEGER as u8,
        ParameterValue::Double(_) => T::PARAMETER_DOUBLE as u8,
        ParameterValue::String(_) => T::PARAMETER_STRING as u8,
        ParameterValue::BoolArray(_) => T::PARAMETER_BOOL_ARRAY as u8,
        ParameterValue::ByteArray(_) => T::PARAMETER_BYTE_ARRAY as u8,
        ParameterValue::IntegerArray(_) => T::PARAMETER_INTEGER_ARRAY as u8,
        ParameterValue::DoubleArray(_) => T::PARAMETER_DOUBLE_ARRAY as u8,
        ParameterValue::StringArray(_) => T::PARAMETER_STRING_ARRAY as u8,
    }
}

/// The descriptions of the pipeline's keys (config/default.yaml's comments), read once.
fn config_descriptions() -> &'static [(String, String)] {
    static D: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    D.get_or_init(schema::descriptions)
}

/// What `describe_parameters` says of `name` (current value `value`); None for a name the
/// node does not have.
pub fn descriptor(name: &str, value: &ParameterValue) -> Option<ParameterDescriptor> {
    let (domain, note, read_only, about) = if let Some(s) = schema::spec_of(name) {
        let about = config_descriptions()
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, d)| d.as_str());
        (Some(s.domain), s.note, false, about.to_string())
    } else if let Some(n) = NODE_SPECS.iter().find(|n| n.name == name) {
        (n.domain, "", n.read_only, n.about.to_string())
    } else {
        return None;
    };
    let mut d = ParameterDescriptor {
        name: name.to_string(),
        type_: type_of(value),
        description: about,
        read_only,
        ..Default::default()
    };
    let mut constraints: Vec<String> = Vec::new();
    match domain {
        Some(Domain::Int {
            min,
            max,
            odd,
            or_zero,
        }) => {
            // ROS's range: from_value + k * step, or to_value. Odd values from an odd start
            // step by 2; "0 or odd" cannot be said so: the range from 0, and the words.
            let odd_only = odd && !or_zero;
            let from = if or_zero { 0 } else { min };
            d.integer_range = vec![IntegerRange {
                from_value: from,
                to_value: max,
                step: if odd_only { 2 } else { 0 },
            }];
            if or_zero || odd {
                constraints.push(
                    Domain::Int {
                        min,
                        max,
                        odd,
                        or_zero,
                    }
                    .describe(),
                );
            }
        }
        Some(Domain::Float {
            min,
            max,
            min_open,
            max_open,
        }) => {
            d.floating_point_range = vec![FloatingPointRange {
                from_value: min,
                to_value: if max.is_finite() { max } else { f64::MAX },
                step: 0.0,
            }];
            if min_open || max_open || max.is_infinite() {
                constraints.push(domain.map(|x| x.describe()).unwrap_or_default());
            }
        }
        Some(Domain::OneOf(all)) => constraints.push(format!("one of: {}", all.join(", "))),
        Some(Domain::Bool) | None => {}
    }
    if !note.is_empty() {
        constraints.push(note.to_string());
    }
    if read_only {
        constraints.push("read-only: set at start (params file or -p)".into());
    }
    d.additional_constraints = constraints.join("; ");
    Some(d)
}

/// The names `list_parameters` answers for `prefixes` and `depth` (0: any depth): those equal
/// to a prefix or under it, and the prefixes (namespaces) that hold them.
pub fn list(all: &[String], prefixes: &[String], depth: u64) -> ListParametersResult {
    let mut out = ListParametersResult::default();
    for name in all {
        let under = prefixes.is_empty()
            || prefixes
                .iter()
                .any(|p| name == p || name.starts_with(&format!("{p}.")));
        let base = prefixes
            .iter()
            .filter(|p| name.starts_with(&format!("{p}.")))
            .map(|p| p.matches('.').count() + 1)
            .max()
            .unwrap_or(0);
        let level = name.matches('.').count() + 1 - base;
        if !under || (depth != 0 && level as u64 > depth) {
            continue;
        }
        out.names.push(name.clone());
        if let Some((prefix, _)) = name.rsplit_once('.') {
            if !out.prefixes.iter().any(|p| p == prefix) {
                out.prefixes.push(prefix.to_string());
            }
        }
    }
    out
}

/// Every parameter with `use_sim_time` (r2r keeps it; the node reads the clock it sets).
fn all_with_sim_time(p: &NodeParams, sim_time: bool) -> Vec<(String, ParameterValue)> {
    let mut all = p.all();
    all.push(("use_sim_time".into(), ParameterValue::Bool(sim_time)));
    all
}

/// Applies the start-up values and serves the six services; the future runs them (spawn
/// it), the stream yields each change made at run time, and the bool is `use_sim_time`.
#[allow(clippy::type_complexity)]
pub fn serve(
    node: &mut r2r::Node,
    params: Arc<Mutex<NodeParams>>,
) -> Result<
    (
        impl Future<Output = ()> + Send,
        futures::channel::mpsc::Receiver<(String, ParameterValue)>,
        bool,
    ),
    String,
> {
    let given: Vec<(String, ParameterValue)> = node
        .params
        .lock()
        .unwrap()
        .iter()
        .map(|(k, p)| (k.clone(), p.value.clone()))
        .collect();
    let sim_time = given
        .iter()
        .any(|(k, v)| k == "use_sim_time" && *v == ParameterValue::Bool(true));
    let unknown = params
        .lock()
        .unwrap()
        .apply_initial(&given)
        .map_err(|e| format!("start-up parameters: {e}"))?;
    for name in unknown.iter().filter(|n| *n != "use_sim_time") {
        eprintln!("[gpu_features_node] warning: ignoring unknown parameter {name:?}");
    }
    let name = node.name().map_err(|e| format!("node name: {e}"))?;
    let (events_tx, events_rx) = futures::channel::mpsc::channel(64);
    let mut s = Services {
        node,
        name,
        handlers: Vec::new(),
    };
    let all = move |p: &Arc<Mutex<NodeParams>>| all_with_sim_time(&p.lock().unwrap(), sim_time);
    let p = params.clone();
    s.answer::<ListParameters::Service>("list_parameters", move |m| {
        let names: Vec<String> = all(&p).into_iter().map(|(k, _)| k).collect();
        let result = list(&names, &m.prefixes, m.depth);
        ListParameters::Response { result }
    })?;
    let p = params.clone();
    s.answer::<GetParameters::Service>("get_parameters", move |m| {
        let all = all(&p);
        let values = m.names.iter().map(|n| to_msg(value_of(&all, n))).collect();
        GetParameters::Response { values }
    })?;
    let p = params.clone();
    s.answer::<GetParameterTypes::Service>("get_parameter_types", move |m| {
        let all = all(&p);
        let types = m.names.iter().map(|n| type_of(value_of(&all, n))).collect();
        GetParameterTypes::Response { types }
    })?;
    let p = params.clone();
    s.answer::<DescribeParameters::Service>("describe_parameters", move |m| {
        let all = all(&p);
        let descriptors = m
            .names
            .iter()
            .map(|n| {
                descriptor(n, value_of(&all, n)).unwrap_or_else(|| ParameterDescriptor {
                    name: n.clone(),
                    ..Default::default()
                })
            })
            .collect();
        DescribeParameters::Response { descriptors }
    })?;
    let (p, mut tx) = (params.clone(), events_tx.clone());
    s.answer::<SetParameters::Service>("set_parameters", move |m| {
        let mut results = Vec::new();
        for m in &m.parameters {
            let v = from_msg(&m.value);
            let r = set_one(&mut p.lock().unwrap(), &m.name, &v);
            if r.successful {
                let _ = tx.try_send((m.name.clone(), v));
            }
            results.push(r);
        }
        SetParameters::Response { results }
    })?;
    let (p, mut tx) = (params, events_tx);
    s.answer::<SetParametersAtomically::Service>("set_parameters_atomically", move |m| {
        let values: Vec<(String, ParameterValue)> = m
            .parameters
            .iter()
            .map(|m| (m.name.clone(), from_msg(&m.value)))
            .collect();
        let result = set_atomically(&mut p.lock().unwrap(), &values);
        if result.successful {
            for e in values {
                let _ = tx.try_send(e);
            }
        }
        SetParametersAtomically::Response { result }
    })?;
    Ok((join_all(s.handlers).map(|_| ()), events_rx, sim_time))
}

/// The value of `name` among `all` (not set when the node has no such parameter).
fn value_of<'a>(all: &'a [(String, ParameterValue)], name: &str) -> &'a ParameterValue {
    all.iter()
        .find(|(k, _)| k == name)
        .map_or(&ParameterValue::NotSet, |(_, v)| v)
}

/// The node's services being made: each answers its requests with a function of the request.
struct Services<'a> {
    node: &'a mut r2r::Node,
    name: String,
    handlers: Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Services<'_> {
    /// `<node>/<service>`, each request answered by `f`.
    fn answer<T>(
        &mut self,
        service: &str,
        mut f: impl FnMut(&T::Request) -> T::Response + Send + 'static,
    ) -> Result<(), String>
    where
        T: r2r::WrappedServiceTypeSupport + 'static,
    {
        let full = format!("{}/{service}", self.name);
        let stream = self
            .node
            .create_service::<T>(&full, QosProfile::default())
            .map_err(|e| format!("parameter service {full}: {e}"))?;
        self.handlers.push(Box::pin(stream.for_each(move |req| {
            let response = f(&req.message);
            let _ = req.respond(response);
            futures::future::ready(())
        })));
        Ok(())
    }
}

fn outcome(r: Result<(), String>) -> SetParametersResult {
    SetParametersResult {
        successful: r.is_ok(),
        reason: r.err().unwrap_or_default(),
    }
}

/// One run-time change (`use_sim_time` is fixed at start).
fn set_one(p: &mut NodeParams, name: &str, v: &ParameterValue) -> SetParametersResult {
    if name == "use_sim_time" {
        return outcome(Err(
            "use_sim_time is read-only at run time (set it at start)".into(),
        ));
    }
    outcome(p.set(name, v))
}

/// All or nothing: every value checked together first, then applied together.
fn set_atomically(p: &mut NodeParams, values: &[(String, ParameterValue)]) -> SetParametersResult {
    for (name, v) in values {
        let checked = if name == "use_sim_time" {
            Err("use_sim_time is read-only at run time (set it at start)".to_string())
        } else {
            p.check(name, v)
        };
        if let Err(e) = checked {
            return outcome(Err(format!("{name}: {e}")));
        }
    }
    for (name, v) in values {
        if let Err(e) = p.set(name, v) {
            return outcome(Err(format!("{name}: {e}")));
        }
    }
    outcome(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_is_described_from_the_tables() {
        let p = NodeParams::new();
        for (name, v) in all_with_sim_time(&p, false) {
            let d = descriptor(&name, &v).unwrap_or_else(|| panic!("{name}: no descriptor"));
            assert!(d.description.len() >= 8, "{name}: {:?}", d.description);
            assert_eq!(d.type_, type_of(&v), "{name}");
            let spec = schema::spec_of(&name).map(|s| s.domain);
            let node = NODE_SPECS.iter().find(|n| n.name == name);
            match spec.or(node.and_then(|n| n.domain)) {
                Some(Domain::Int {
                    min, max, or_zero, ..
                }) => {
                    let r = &d.integer_range[0];
                    assert_eq!(
                        (r.from_value, r.to_value),
                        (if or_zero { 0 } else { min }, max),
                        "{name}"
                    );
                }
                Some(Domain::Float { min, .. }) => {
                    assert_eq!(d.floating_point_range[0].from_value, min, "{name}")
                }
                Some(Domain::OneOf(all)) => {
                    assert!(d.additional_constraints.contains(&all.join(", ")), "{name}")
                }
                _ => {}
            }
            assert_eq!(
                d.read_only,
                node.is_some_and(|n| n.read_only),
                "{name}: read-only flag"
            );
        }
        assert!(descriptor("no.such", &ParameterValue::Bool(true)).is_none());
        let odd = descriptor("orient.patch_size", &ParameterValue::Integer(31)).unwrap();
        assert_eq!(odd.integer_range[0].step, 2);
        let open = descriptor("pyramid.scale_factor", &ParameterValue::Double(1.2)).unwrap();
        assert!(open.additional_constraints.contains("(1, 4]"), "{open:?}");
    }

    #[test]
    fn lists_by_prefix_and_depth() {
        let all: Vec<String> = ["backend", "canny.enabled", "cuda.device", "a.b.c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let r = list(&all, &[], 0);
        assert_eq!(r.names, all);
        assert_eq!(r.prefixes, ["canny", "cuda", "a.b"]);
        assert_eq!(list(&all, &[], 1).names, ["backend"]);
        assert_eq!(list(&all, &["canny".into()], 0).names, ["canny.enabled"]);
        assert_eq!(list(&all, &["a".into()], 1).names, Vec::<String>::new());
        assert_eq!(list(&all, &["a".into()], 2).names, ["a.b.c"]);
    }

    #[test]
    fn values_round_trip_through_messages() {
        for v in [
            ParameterValue::Bool(true),
            ParameterValue::Integer(-3),
            ParameterValue::Double(1.5),
            ParameterValue::String("x".into()),
            ParameterValue::StringArray(vec!["a".into(), "b".into()]),
            ParameterValue::IntegerArray(vec![1, 2]),
        ] {
            assert_eq!(from_msg(&to_msg(&v)), v);
        }
    }

    #[test]
    fn atomic_sets_apply_all_or_nothing() {
        let mut p = NodeParams::new();
        let r = set_atomically(
            &mut p,
            &[
                ("canny.low_threshold".into(), ParameterValue::Double(10.0)),
                ("pyramid.levels".into(), ParameterValue::Integer(0)),
            ],
        );
        assert!(
            !r.successful && r.reason.contains("pyramid.levels"),
            "{r:?}"
        );
        assert_eq!(p.live.config.canny.low_threshold, 50.0, "nothing applied");
        let r = set_atomically(
            &mut p,
            &[
                (
                    "detector.min_fast_threshold".into(),
                    ParameterValue::Integer(3),
                ),
                ("detector.fast_threshold".into(), ParameterValue::Integer(5)),
            ],
        );
        assert!(r.successful, "{r:?}");
        assert_eq!(p.live.config.detector.fast_threshold, 5);
        assert!(!set_one(&mut p, "use_sim_time", &ParameterValue::Bool(true)).successful);
    }
}
