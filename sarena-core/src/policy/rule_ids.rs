//! Rule numbers: one per (policy namespace, name, direction, index), stable
//! while the rule exists, never reused while the engine lives.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::compiled::{Direction, RuleId, RuleRef};
use super::model::Policy;

/// Which rule of which policy.
type RuleKey = (String, String, Direction, usize);

/// The rule numbers allocated so far.
#[derive(Debug)]
pub(crate) struct RuleIds {
    next: u32,
    ids: HashMap<RuleKey, RuleId>,
}

impl Default for RuleIds {
    fn default() -> Self {
        RuleIds {
            next: 1,
            ids: HashMap::new(),
        }
    }
}

/// The numbers of one policy's rules, by direction.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyRules {
    /// `ingress[i]`'s number.
    pub(crate) ingress: Vec<RuleId>,
    /// `egress[i]`'s number.
    pub(crate) egress: Vec<RuleId>,
}

impl PolicyRules {
    /// The numbers of `direction`'s rules.
    pub(crate) fn of(&self, direction: Direction) -> &[RuleId] {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

impl RuleIds {
    /// Numbers every rule of `policies` (in their order), forgets the
    /// numbers of rules that are gone, and returns the numbers with what
    /// each stands for.
    pub(crate) fn assign<'a>(
        &mut self,
        policies: impl Iterator<Item = &'a Policy>,
    ) -> (Vec<PolicyRules>, BTreeMap<RuleId, RuleRef>) {
        let mut numbered = Vec::new();
        let mut refs = BTreeMap::new();
        let mut used = HashSet::new();
        for p in policies {
            let mut rules = PolicyRules::default();
            for (direction, list) in [
                (Direction::Ingress, &p.ingress),
                (Direction::Egress, &p.egress),
            ] {
                for index in 0..list.len() {
                    let key = (p.namespace.clone(), p.name.clone(), direction, index);
                    let id = match self.ids.get(&key) {
                        Some(id) => *id,
                        None => {
                            let id = RuleId(self.next);
                            self.next = self.next.saturating_add(1);
                            self.ids.insert(key, id);
                            id
                        }
                    };
                    used.insert(id);
                    let r = RuleRef {
                        namespace: p.namespace.clone(),
                        name: p.name.clone(),
                        direction,
                        index,
                    };
                    refs.insert(id, r);
                    match direction {
                        Direction::Ingress => rules.ingress.push(id),
                        Direction::Egress => rules.egress.push(id),
                    }
                }
            }
            numbered.push(rules);
        }
        self.ids.retain(|_, id| used.contains(id));
        (numbered, refs)
    }
}
