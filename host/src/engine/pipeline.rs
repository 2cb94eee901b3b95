//! Pipeline descriptions: stages, the stream (lane) each runs on and the buffers they read and
//! write, some of them rings of `depth` instances (double or triple buffering). The plan
//! derived from a description says which stage must wait for which (within an iteration and
//! across iterations, when a ring slot is reused), which of those waits need an event because
//! the two stages run on different streams, and how long each ring slot lives. Cycles are
//! rejected. [`super::schedule`] runs the plan eagerly or captures it into CUDA graphs.
//!
//! Semantics: every iteration runs every stage once. A stage's reads see the values its
//! producers wrote in the same iteration (each resource has at most one writing stage; a
//! resource nobody writes is an input, read-only during the loop). A ring resource has `depth`
//! instances, iteration `i` using instance `i % depth`; a persistent resource has one.

use super::timeline::OpKind;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

pub use super::schedule::StageCall;

/// Largest ring depth accepted.
pub const MAX_DEPTH: usize = 16;

/// A buffer the stages share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSpec {
    /// Name stages refer to it by.
    pub name: String,
    /// One instance per ring slot (`true`) or a single instance.
    pub ring: bool,
}

/// One stage of the pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageSpec {
    /// Name (shown in traces).
    pub name: String,
    /// What it does.
    pub kind: OpKind,
    /// Index of the lane (stream) it runs on.
    pub lane: usize,
    /// Resources it reads.
    pub reads: Vec<String>,
    /// Resources it writes.
    pub writes: Vec<String>,
}

/// A pipeline description; [`PipelineSpec::plan`] checks it and derives the dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineSpec {
    /// Lane names: one stream each when run, unless lanes are mapped onto fewer streams.
    pub lanes: Vec<String>,
    /// Number of instances of each ring resource (2: double buffering, 3: triple).
    pub depth: usize,
    /// Shared buffers.
    pub resources: Vec<ResourceSpec>,
    /// Stages, in any order (the plan orders them).
    pub stages: Vec<StageSpec>,
}

/// Why one stage waits for another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hazard {
    /// The later stage reads what the earlier one wrote.
    ReadAfterWrite,
    /// The later stage overwrites what the earlier one read.
    WriteAfterRead,
    /// The later stage overwrites what the earlier one wrote.
    WriteAfterWrite,
}

/// Stage `to` in iteration `i` must run after stage `from` in iteration `i - distance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dependency {
    /// Earlier stage.
    pub from: usize,
    /// Later stage.
    pub to: usize,
    /// Iterations between them (0: the same iteration).
    pub distance: usize,
    /// Why.
    pub hazard: Hazard,
    /// Through which resource.
    pub resource: usize,
}

/// How long one ring slot of a resource is in use in an iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// The resource.
    pub resource: usize,
    /// The stage that fills the slot (none for an input).
    pub producer: Option<usize>,
    /// The stages that read it; the slot is free for reuse once all of them finished.
    pub consumers: Vec<usize>,
    /// Iterations until the same slot is written again.
    pub reuse_distance: usize,
}

/// A checked pipeline with its derived dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    spec: PipelineSpec,
    order: Vec<usize>,
    deps: Vec<Dependency>,
    lifetimes: Vec<Lifetime>,
}

impl PipelineSpec {
    /// An empty description with rings of `depth`.
    pub fn new(depth: usize) -> Self {
        PipelineSpec {
            lanes: Vec::new(),
            depth,
            resources: Vec::new(),
            stages: Vec::new(),
        }
    }

    /// Adds a lane.
    pub fn lane(mut self, name: &str) -> Self {
        self.lanes.push(name.into());
        self
    }

    /// Adds a ring resource (one instance per slot).
    pub fn ring(mut self, name: &str) -> Self {
        self.resources.push(ResourceSpec {
            name: name.into(),
            ring: true,
        });
        self
    }

    /// Adds a single-instance resource.
    pub fn persistent(mut self, name: &str) -> Self {
        self.resources.push(ResourceSpec {
            name: name.into(),
            ring: false,
        });
        self
    }

    /// Adds a stage on lane `lane` (by name; an unknown name is reported by [`Self::plan`]).
    pub fn stage(
        mut self,
        name: &str,
        kind: OpKind,
        lane: &str,
        reads: &[&str],
        writes: &[&str],
    ) -> Self {
        let lane = self
            .lanes
            .iter()
            .position(|l| l == lane)
            .unwrap_or(usize::MAX);
        self.stages.push(StageSpec {
            name: name.into(),
            kind,
            lane,
            reads: reads.iter().map(|s| s.to_string()).collect(),
            writes: writes.iter().map(|s| s.to_string()).collect(),
        });
        self
    }

    fn invalid(part: impl Into<String>, reason: String) -> Error {
        Error::InvalidPipeline {
            part: part.into(),
            reason,
        }
    }

    /// Checks the description and derives its plan: the stage order within an iteration, every
    /// dependency, and the ring slots' lifetimes. Rejects unknown or duplicate names, a stage
    /// that reads and writes one resource, a resource with two writers, and cycles.
    pub fn plan(&self) -> Result<Plan> {
        let bad = |part: String, r: String| Err(Self::invalid(part, r));
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return bad(
                "depth".into(),
                format!("must be in 1..={MAX_DEPTH}, got {}", self.depth),
            );
        }
        if self.lanes.is_empty() || self.lanes.len() > 64 {
            return bad(
                "lanes".into(),
                format!("a pipeline has 1..=64 lanes, got {}", self.lanes.len()),
            );
        }
        if self.stages.is_empty() {
            return bad(
                "stages".into(),
                "a pipeline needs at least one stage".into(),
            );
        }
        for (what, names) in [
            ("lane", self.lanes.iter().collect::<Vec<_>>()),
            ("resource", self.resources.iter().map(|r| &r.name).collect()),
            ("stage", self.stages.iter().map(|s| &s.name).collect()),
        ] {
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return bad(format!("{what} `{n}`"), "is declared twice".into());
                }
            }
        }
        let res_index = |n: &str| self.resources.iter().position(|r| r.name == n);
        let nres = self.resources.len();
        let mut writer: Vec<Option<usize>> = vec![None; nres];
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nres];
        for (si, s) in self.stages.iter().enumerate() {
            if s.lane >= self.lanes.len() {
                return bad(
                    format!("stage `{}`", s.name),
                    "runs on an undeclared lane".into(),
                );
            }
            for r in &s.reads {
                let Some(ri) = res_index(r) else {
                    return bad(
                        format!("stage `{}`", s.name),
                        format!("reads undeclared resource `{r}`"),
                    );
                };
                if s.writes.contains(r) {
                    return bad(
                        format!("stage `{}`", s.name),
                        format!("reads and writes `{r}`: write to another resource"),
                    );
                }
                if !readers[ri].contains(&si) {
                    readers[ri].push(si);
                }
            }
            for w in &s.writes {
                let Some(ri) = res_index(w) else {
                    return bad(
                        format!("stage `{}`", s.name),
                        format!("writes undeclared resource `{w}`"),
                    );
                };
                if let Some(prev) = writer[ri] {
                    if prev != si {
                        return bad(
                            format!("resource `{w}`"),
                            format!(
                                "is written by both `{}` and `{}`",
                                self.stages[prev].name, s.name
                            ),
                        );
                    }
                }
                writer[ri] = Some(si);
            }
        }
        let mut deps = Vec::new();
        for ri in 0..nres {
            let Some(w) = writer[ri] else { continue };
            let period = if self.resources[ri].ring {
                self.depth
            } else {
                1
            };
            for &r in &readers[ri] {
                deps.push(Dependency {
                    from: w,
                    to: r,
                    distance: 0,
                    hazard: Hazard::ReadAfterWrite,
                    resource: ri,
                });
                deps.push(Dependency {
                    from: r,
                    to: w,
                    distance: period,
                    hazard: Hazard::WriteAfterRead,
                    resource: ri,
                });
            }
            deps.push(Dependency {
                from: w,
                to: w,
                distance: period,
                hazard: Hazard::WriteAfterWrite,
                resource: ri,
            });
        }
        deps.sort();
        deps.dedup();
        let order = self.topological(&deps)?;
        let lifetimes = (0..nres)
            .filter(|&ri| self.resources[ri].ring)
            .map(|ri| Lifetime {
                resource: ri,
                producer: writer[ri],
                consumers: readers[ri].clone(),
                reuse_distance: self.depth,
            })
            .collect();
        Ok(Plan {
            spec: self.clone(),
            order,
            deps,
            lifetimes,
        })
    }

    /// Kahn's algorithm over the same-iteration edges, declaration order among ready stages;
    /// on a cycle, names the stages and resources around it.
    fn topological(&self, deps: &[Dependency]) -> Result<Vec<usize>> {
        let n = self.stages.len();
        let edges: Vec<&Dependency> = deps.iter().filter(|d| d.distance == 0).collect();
        let mut indeg = vec![0usize; n];
        for d in &edges {
            indeg[d.to] += 1;
        }
        let mut order = Vec::with_capacity(n);
        let mut done = vec![false; n];
        while order.len() < n {
            let Some(next) = (0..n).find(|&s| !done[s] && indeg[s] == 0) else {
                return Err(Self::invalid("stages", self.describe_cycle(&edges, &done)));
            };
            done[next] = true;
            order.push(next);
            for d in edges.iter().filter(|d| d.from == next) {
                indeg[d.to] -= 1;
            }
        }
        Ok(order)
    }

    fn describe_cycle(&self, edges: &[&Dependency], done: &[bool]) -> String {
        // Every remaining stage has a remaining predecessor: walk backwards until a stage
        // repeats.
        let start = (0..done.len()).find(|&s| !done[s]).unwrap_or(0);
        let mut path = vec![start];
        let mut via = Vec::new();
        loop {
            let cur = *path.last().unwrap_or(&start);
            let Some(e) = edges.iter().find(|e| e.to == cur && !done[e.from]) else {
                break;
            };
            via.push(e.resource);
            if let Some(pos) = path.iter().position(|&p| p == e.from) {
                path.push(e.from);
                let cycle: Vec<&str> = path[pos..]
                    .iter()
                    .rev()
                    .map(|&s| self.stages[s].name.as_str())
                    .collect();
                let res: Vec<&str> = via[pos..]
                    .iter()
                    .rev()
                    .map(|&r| self.resources[r].name.as_str())
                    .collect();
                return format!(
                    "the stages form a cycle: {} (through {})",
                    cycle.join(" -> "),
                    res.join(", ")
                );
            }
            path.push(e.from);
        }
        "the stages form a cycle".into()
    }
}

impl Plan {
    /// The description.
    pub fn spec(&self) -> &PipelineSpec {
        &self.spec
    }

    /// Stage indices in the order one iteration issues them.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Every dependency, same-stream ones included.
    pub fn dependencies(&self) -> &[Dependency] {
        &self.deps
    }

    /// The ring resources' lifetimes.
    pub fn lifetimes(&self) -> &[Lifetime] {
        &self.lifetimes
    }

    /// Index of the stage called `name`.
    pub fn stage(&self, name: &str) -> Option<usize> {
        self.spec.stages.iter().position(|s| s.name == name)
    }

    /// The waits that need an event when lane `l` runs on stream `lane_streams[l]`: for each
    /// stage, one `(from stage, distance)` per other stream it depends on, the latest issued
    /// operation of that stream (stream order covers the earlier ones).
    pub fn events(&self, lane_streams: &[usize]) -> Result<Vec<Vec<(usize, usize)>>> {
        if lane_streams.len() != self.spec.lanes.len() {
            return Err(Error::arg(
                "lane_streams",
                format!(
                    "has {} entries for {} lanes",
                    lane_streams.len(),
                    self.spec.lanes.len()
                ),
            ));
        }
        let n = self.spec.stages.len();
        let pos: Vec<usize> = {
            let mut p = vec![0; n];
            for (k, &s) in self.order.iter().enumerate() {
                p[s] = k;
            }
            p
        };
        let stream_of = |s: usize| lane_streams[self.spec.stages[s].lane];
        let mut out = vec![Vec::new(); n];
        for (to, waits) in out.iter_mut().enumerate() {
            // Latest issued source per stream: issue index (iteration - distance) * n + pos.
            let mut best: BTreeMap<usize, (i64, usize, usize)> = BTreeMap::new();
            for d in self.deps.iter().filter(|d| d.to == to) {
                let st = stream_of(d.from);
                if st == stream_of(to) {
                    continue;
                }
                let key = pos[d.from] as i64 - (d.distance * n) as i64;
                let e = best.entry(st).or_insert((i64::MIN, 0, 0));
                if key > e.0 {
                    *e = (key, d.from, d.distance);
                }
            }
            *waits = best.values().map(|&(_, f, d)| (f, d)).collect();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefetch(depth: usize) -> PipelineSpec {
        PipelineSpec::new(depth)
            .lane("copy")
            .lane("compute")
            .persistent("dataset")
            .ring("x")
            .ring("y")
            .stage("h2d", OpKind::H2D, "copy", &["dataset"], &["x"])
            .stage("compute", OpKind::Compute, "compute", &["x"], &["y"])
            .stage("d2h", OpKind::D2H, "copy", &["y"], &["results"])
            .persistent("results")
    }

    fn dep(p: &Plan, from: &str, to: &str, distance: usize, hazard: Hazard) -> bool {
        let (f, t) = (p.stage(from).unwrap(), p.stage(to).unwrap());
        p.dependencies()
            .iter()
            .any(|d| d.from == f && d.to == t && d.distance == distance && d.hazard == hazard)
    }

    #[test]
    fn prefetch_dependencies_are_derived() {
        let p = prefetch(2).plan().unwrap();
        let names: Vec<&str> = p
            .order()
            .iter()
            .map(|&s| p.spec().stages[s].name.as_str())
            .collect();
        assert_eq!(names, ["h2d", "compute", "d2h"]);
        use Hazard::*;
        assert!(dep(&p, "h2d", "compute", 0, ReadAfterWrite));
        assert!(dep(&p, "compute", "d2h", 0, ReadAfterWrite));
        // Slot x[i % 2] is refilled two iterations later, after compute read it.
        assert!(dep(&p, "compute", "h2d", 2, WriteAfterRead));
        assert!(dep(&p, "d2h", "compute", 2, WriteAfterRead));
        assert!(dep(&p, "h2d", "h2d", 2, WriteAfterWrite));
        // results is persistent: written every iteration, nobody reads it in the loop.
        assert!(dep(&p, "d2h", "d2h", 1, WriteAfterWrite));
        // dataset is an input: no hazards through it.
        let ds = 0;
        assert!(p.dependencies().iter().all(|d| d.resource != ds));
        assert_eq!(p.dependencies().len(), 7);
        let lt = p.lifetimes();
        assert_eq!(lt.len(), 2);
        assert_eq!(lt[0].producer, p.stage("h2d"));
        assert_eq!(lt[0].consumers, vec![p.stage("compute").unwrap()]);
        assert_eq!(lt[0].reuse_distance, 2);
    }

    #[test]
    fn events_only_between_streams_latest_per_stream() {
        let p = prefetch(3).plan().unwrap();
        let (h, c, d) = (
            p.stage("h2d").unwrap(),
            p.stage("compute").unwrap(),
            p.stage("d2h").unwrap(),
        );
        // Two streams: copy lane on 0, compute lane on 1.
        let ev = p.events(&[0, 1]).unwrap();
        assert_eq!(
            ev[c],
            vec![(h, 0)],
            "compute waits for this iteration's h2d"
        );
        assert_eq!(
            ev[d],
            vec![(c, 0)],
            "d2h waits for this iteration's compute"
        );
        assert_eq!(
            ev[h],
            vec![(c, 3)],
            "h2d waits until compute released the slot"
        );
        // One stream: stream order does everything.
        let ev = p.events(&[0, 0]).unwrap();
        assert!(ev.iter().all(|w| w.is_empty()));
        // Three streams: d2h alone on its own stream.
        let spec = PipelineSpec {
            stages: prefetch(2)
                .stages
                .into_iter()
                .map(|mut s| {
                    if s.name == "d2h" {
                        s.lane = 2;
                    }
                    s
                })
                .collect(),
            lanes: vec!["copy".into(), "compute".into(), "back".into()],
            ..prefetch(2)
        };
        let p = spec.plan().unwrap();
        let ev = p.events(&[0, 1, 2]).unwrap();
        assert_eq!(ev[c], vec![(h, 0), (d, 2)]);
        assert!(p.events(&[0, 1]).is_err(), "one stream per lane");
    }

    #[test]
    fn persistent_resource_written_each_iteration_waits_for_last_iterations_readers() {
        let p = PipelineSpec::new(2)
            .lane("a")
            .lane("b")
            .persistent("w")
            .stage("update", OpKind::Compute, "a", &[], &["w"])
            .stage("use", OpKind::Compute, "b", &["w"], &[])
            .plan()
            .unwrap();
        assert!(dep(&p, "update", "use", 0, Hazard::ReadAfterWrite));
        assert!(dep(&p, "use", "update", 1, Hazard::WriteAfterRead));
        let ev = p.events(&[0, 1]).unwrap();
        assert_eq!(
            ev[p.stage("update").unwrap()],
            vec![(p.stage("use").unwrap(), 1)]
        );
    }

    #[test]
    fn branches_join() {
        let p = PipelineSpec::new(1)
            .lane("main")
            .lane("left")
            .lane("right")
            .persistent("x")
            .persistent("a")
            .persistent("b")
            .persistent("out")
            .stage("left", OpKind::Compute, "left", &["x"], &["a"])
            .stage("right", OpKind::Compute, "right", &["x"], &["b"])
            .stage("join", OpKind::D2H, "main", &["a", "b"], &["out"])
            .plan()
            .unwrap();
        let j = p.stage("join").unwrap();
        assert_eq!(*p.order().last().unwrap(), j);
        let ev = p.events(&[0, 1, 2]).unwrap();
        assert_eq!(ev[j].len(), 2, "the join waits for both branches");
    }

    #[test]
    fn cycles_are_rejected_with_the_cycle_named() {
        let e = PipelineSpec::new(2)
            .lane("s")
            .ring("a")
            .ring("b")
            .ring("c")
            .stage("p", OpKind::Compute, "s", &["c"], &["a"])
            .stage("q", OpKind::Compute, "s", &["a"], &["b"])
            .stage("r", OpKind::Compute, "s", &["b"], &["c"])
            .plan()
            .unwrap_err()
            .to_string();
        assert!(e.contains("cycle"), "{e}");
        for s in ["p", "q", "r"] {
            assert!(
                e.contains(&format!("{s} ->")) || e.contains(&format!("-> {s}")),
                "{e}"
            );
        }
        assert!(e.contains("(through"), "{e}");
        // Two-stage cycle.
        let e = PipelineSpec::new(1)
            .lane("s")
            .persistent("a")
            .persistent("b")
            .stage("x", OpKind::Compute, "s", &["b"], &["a"])
            .stage("y", OpKind::Compute, "s", &["a"], &["b"])
            .plan()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x -> y -> x") || e.contains("y -> x -> y"),
            "{e}"
        );
    }

    #[test]
    fn bad_descriptions_are_rejected() {
        let ok = prefetch(2);
        let cases: Vec<(PipelineSpec, &str)> = vec![
            (
                PipelineSpec {
                    depth: 0,
                    ..ok.clone()
                },
                "depth",
            ),
            (
                PipelineSpec {
                    depth: 17,
                    ..ok.clone()
                },
                "depth",
            ),
            (
                PipelineSpec {
                    lanes: vec![],
                    ..ok.clone()
                },
                "lanes",
            ),
            (
                PipelineSpec {
                    stages: vec![],
                    ..ok.clone()
                },
                "at least one stage",
            ),
            (ok.clone().ring("x"), "declared twice"),
            (ok.clone().lane("copy"), "declared twice"),
            (
                ok.clone().stage("h2d", OpKind::H2D, "copy", &[], &[]),
                "declared twice",
            ),
            (
                ok.clone().stage("z", OpKind::H2D, "nope", &[], &[]),
                "undeclared lane",
            ),
            (
                ok.clone().stage("z", OpKind::H2D, "copy", &["nope"], &[]),
                "undeclared resource `nope`",
            ),
            (
                ok.clone().stage("z", OpKind::H2D, "copy", &[], &["nope"]),
                "undeclared resource `nope`",
            ),
            (
                ok.clone().stage("z", OpKind::H2D, "copy", &[], &["x"]),
                "written by both `h2d` and `z`",
            ),
            (
                ok.clone().stage("z", OpKind::H2D, "copy", &["y"], &["y"]),
                "reads and writes `y`",
            ),
        ];
        for (spec, want) in cases {
            let e = spec.plan().unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
    }
}
