//! The jobs the controller knows, and which job owns which flow.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use super::{Job, JobError, Problem};
use crate::flow::FlowKey;

/// A job's name and how many of its flows share one host pair.
type JobCount = (Arc<str>, u32);

/// Registered jobs by name, and the owner of every flow they announced.
///
/// Two jobs may share a host pair with distinct QPs (`Flow` keys), but a
/// host-pair flow (`Pair` key) owns everything between its two hosts, so
/// it conflicts with any flow of another job on that pair.
#[derive(Debug, Clone, Default)]
pub struct JobRegistry {
    jobs: BTreeMap<Arc<str>, Job>,
    owners: HashMap<FlowKey, Arc<str>>,
    /// Jobs with any flow between two hosts, and how many flows each has there.
    by_pair: HashMap<(Ipv4Addr, Ipv4Addr), Vec<JobCount>>,
    flows: usize,
}

impl JobRegistry {
    pub fn get(&self, name: &str) -> Option<&Job> {
        self.jobs.get(name)
    }

    /// Jobs in name order.
    pub fn list(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Flows over all jobs.
    pub fn flow_count(&self) -> usize {
        self.flows
    }

    /// The job that owns `key`: the flow itself, or its host pair.
    pub fn owner(&self, key: &FlowKey) -> Option<&str> {
        self.owners.get(key).or_else(|| self.owners.get(&FlowKey::pair(key.src(), key.dst()))).map(|s| &**s)
    }

    /// The job other than `name` whose flows conflict with `key`, if any.
    pub(crate) fn conflict<'a>(&'a self, key: &FlowKey, name: &str) -> Option<&'a str> {
        fn other<'a>(s: &'a Arc<str>, name: &str) -> Option<&'a str> {
            (&**s != name).then_some(&**s)
        }
        let other = |s: &'a Arc<str>| other(s, name);
        match key {
            FlowKey::Flow { src, dst, .. } => self
                .owners
                .get(key)
                .and_then(other)
                .or_else(|| self.owners.get(&FlowKey::pair(*src, *dst)).and_then(other)),
            FlowKey::Pair { src, dst } => {
                self.by_pair.get(&(*src, *dst)).and_then(|v| v.iter().find_map(|(s, _)| other(s)))
            }
        }
    }

    /// Adds a validated job. Refuses (listing every conflict) if the name
    /// is taken or another job registered an overlapping flow since the
    /// job was validated.
    pub fn register(&mut self, job: Job) -> Result<(), JobError> {
        let mut problems = Vec::new();
        if self.jobs.contains_key(job.name.as_str()) {
            problems
                .push(Problem::new("name", format!("a job named \"{}\" is already registered", job.name)));
        }
        for (i, f) in job.flows.iter().enumerate() {
            if let Some(other) = self.conflict(&f.key, &job.name) {
                problems.push(Problem::new(
                    &f.origin(i),
                    format!("flow {} is already owned by job \"{other}\"", f.key),
                ));
                if problems.len() >= super::MAX_PROBLEMS {
                    break;
                }
            }
        }
        if !problems.is_empty() {
            return Err(JobError { problems });
        }
        let name: Arc<str> = Arc::from(job.name.as_str());
        for f in &job.flows {
            self.owners.insert(f.key, name.clone());
            let v = self.by_pair.entry((f.key.src(), f.key.dst())).or_default();
            match v.iter_mut().find(|(s, _)| *s == name) {
                Some((_, n)) => *n += 1,
                None => v.push((name.clone(), 1)),
            }
        }
        self.flows += job.flows.len();
        self.jobs.insert(name, job);
        Ok(())
    }

    /// Removes a job and releases its flows; returns it (the caller
    /// removes its flows from the planner).
    pub fn remove(&mut self, name: &str) -> Option<Job> {
        let job = self.jobs.remove(name)?;
        for f in &job.flows {
            self.owners.remove(&f.key);
            let pair = (f.key.src(), f.key.dst());
            if let Some(v) = self.by_pair.get_mut(&pair) {
                if let Some(p) = v.iter().position(|(s, _)| &**s == name) {
                    v[p].1 -= 1;
                    if v[p].1 == 0 {
                        v.swap_remove(p);
                    }
                }
                if v.is_empty() {
                    self.by_pair.remove(&pair);
                }
            }
        }
        self.flows -= job.flows.len();
        Some(job)
    }
}
