//! The generated inputs of the property tests: a query as its parts, each
//! criterion value of a concrete Rust type, and its canonical form by the
//! spec model.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::num::NonZero;
use std::rc::Rc;
use std::sync::Arc;

use cache_key::{Key, KeyBuilder, KeyError};

use super::spec_model::{Canonical, js_number, list, pairs, set};

/// A criterion value of one of the types the format's table lists.
#[derive(Debug, Clone)]
pub enum Value {
    Str(String),
    BoxedStr(Box<str>),
    Char(char),
    U8(u8),
    I8(i8),
    U64(u64),
    I64(i64),
    U128(u128),
    I128(i128),
    Usize(usize),
    Isize(isize),
    NonZeroU32(NonZero<u32>),
    Bool(bool),
    F64(f64),
    F32(f32),
    OptStr(Option<String>),
    OptI64(Option<i64>),
    List(Vec<String>),
    Deque(VecDeque<String>),
    ArcList(Arc<[String]>),
    ListOpt(Vec<Option<String>>),
    ListF64(Vec<f64>),
    ListI128(Vec<i128>),
    Nested(Vec<Vec<String>>),
    Array([String; 2]),
    Set(BTreeSet<String>),
    SetI64(BTreeSet<i64>),
    /// Built into a `HashSet` with a fresh `RandomState` each time it is used.
    HashSet(Vec<String>),
    SetOfLists(BTreeSet<Vec<String>>),
    ListOfSets(Vec<BTreeSet<String>>),
    RcOptList(Rc<Option<Vec<Option<String>>>>),
}

impl Value {
    /// The canonical string, by the model.
    pub fn model(&self) -> String {
        let texts = |items: &[String]| items.to_vec();
        match self {
            Value::Str(s) => s.clone(),
            Value::BoxedStr(s) => s.to_string(),
            Value::Char(c) => c.to_string(),
            Value::U8(n) => n.to_string(),
            Value::I8(n) => n.to_string(),
            Value::U64(n) => n.to_string(),
            Value::I64(n) => n.to_string(),
            Value::U128(n) => n.to_string(),
            Value::I128(n) => n.to_string(),
            Value::Usize(n) => n.to_string(),
            Value::Isize(n) => n.to_string(),
            Value::NonZeroU32(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::F64(x) => js_number(*x),
            Value::F32(x) => js_number(*x),
            Value::OptStr(o) => o.clone().unwrap_or_default(),
            Value::OptI64(o) => o.map(|n| n.to_string()).unwrap_or_default(),
            Value::List(items) => list(texts(items)),
            Value::Deque(items) => list(items.iter().cloned()),
            Value::ArcList(items) => list(texts(items)),
            Value::ListOpt(items) => list(items.iter().map(|o| o.clone().unwrap_or_default())),
            Value::ListF64(items) => list(items.iter().map(|x| js_number(*x))),
            Value::ListI128(items) => list(items.iter().map(i128::to_string)),
            Value::Nested(items) => list(items.iter().map(|inner| list(texts(inner)))),
            Value::Array(items) => list(texts(items)),
            Value::Set(items) => set(items.iter().cloned()),
            Value::SetI64(items) => set(items.iter().map(i64::to_string)),
            Value::HashSet(items) => set(items.iter().cloned()),
            Value::SetOfLists(items) => set(items.iter().map(|inner| list(texts(inner)))),
            Value::ListOfSets(items) => list(items.iter().map(|inner| set(inner.iter().cloned()))),
            Value::RcOptList(o) => match &**o {
                None => String::new(),
                Some(items) => list(items.iter().map(|o| o.clone().unwrap_or_default())),
            },
        }
    }

    /// Adds this value as criterion `name`, passing the concrete Rust type.
    pub fn add_to(&self, builder: &mut KeyBuilder<'_>, name: &str) {
        match self {
            Value::Str(s) => builder.criterion(name, s.as_str()),
            Value::BoxedStr(s) => builder.criterion(name, s.clone()),
            Value::Char(c) => builder.criterion(name, *c),
            Value::U8(n) => builder.criterion(name, *n),
            Value::I8(n) => builder.criterion(name, *n),
            Value::U64(n) => builder.criterion(name, *n),
            Value::I64(n) => builder.criterion(name, *n),
            Value::U128(n) => builder.criterion(name, *n),
            Value::I128(n) => builder.criterion(name, *n),
            Value::Usize(n) => builder.criterion(name, *n),
            Value::Isize(n) => builder.criterion(name, *n),
            Value::NonZeroU32(n) => builder.criterion(name, *n),
            Value::Bool(b) => builder.criterion(name, *b),
            Value::F64(x) => builder.criterion(name, *x),
            Value::F32(x) => builder.criterion(name, *x),
            Value::OptStr(o) => builder.criterion(name, o.as_deref()),
            Value::OptI64(o) => builder.criterion(name, *o),
            Value::List(items) => builder.criterion(name, items),
            Value::Deque(items) => builder.criterion(name, items),
            Value::ArcList(items) => builder.criterion(name, Arc::clone(items)),
            Value::ListOpt(items) => builder.criterion(name, items.as_slice()),
            Value::ListF64(items) => builder.criterion(name, items),
            Value::ListI128(items) => builder.criterion(name, items),
            Value::Nested(items) => builder.criterion(name, items),
            Value::Array(items) => builder.criterion(name, items),
            Value::Set(items) => builder.criterion(name, items),
            Value::SetI64(items) => builder.criterion(name, items),
            Value::HashSet(items) => {
                let mut set = HashSet::with_hasher(RandomState::new());
                set.extend(items.iter().cloned());
                builder.criterion(name, set)
            }
            Value::SetOfLists(items) => builder.criterion(name, items),
            Value::ListOfSets(items) => builder.criterion(name, items),
            Value::RcOptList(o) => builder.criterion(name, Rc::clone(o)),
        };
    }
}

/// One part of a tenant: text, an integer or a `char`.
#[derive(Debug, Clone)]
pub enum Part {
    Str(String),
    U64(u64),
    I128(i128),
    Char(char),
}

impl Part {
    pub fn model(&self) -> String {
        match self {
            Part::Str(s) => s.clone(),
            Part::U64(n) => n.to_string(),
            Part::I128(n) => n.to_string(),
            Part::Char(c) => c.to_string(),
        }
    }

    /// Adds the part; a zero integer is declared a real tenant, since the
    /// model writes it (`ZeroTenant` calls test the refusal).
    pub fn add_to(&self, builder: &mut KeyBuilder<'_>) {
        const REAL: &str = "0 is a real tenant in these properties";
        match self {
            Part::Str(s) => builder.tenant(s.clone()),
            Part::U64(n) => builder.tenant_allowing_zero(*n, REAL),
            Part::I128(n) => builder.tenant_allowing_zero(*n, REAL),
            Part::Char(c) => builder.tenant(*c),
        };
    }
}

#[derive(Debug, Clone)]
pub enum Tenant {
    Global,
    /// One part, or the parts of a compound tenant in order (`.tenant(a).tenant(b)`).
    Parts(Vec<Part>),
}

/// Everything a key is made of.
#[derive(Debug, Clone)]
pub struct Input {
    pub namespace: String,
    pub operation: String,
    pub schema: u32,
    pub generation: u64,
    pub tenant: Tenant,
    pub hash_tag: bool,
    /// Names are unique.
    pub criteria: Vec<(String, Value)>,
}

impl Input {
    /// A global `ns` `op` key at schema and generation 1, with `criteria`.
    pub fn global(criteria: Vec<(String, Value)>) -> Input {
        Input {
            namespace: "ns".into(),
            operation: "op".into(),
            schema: 1,
            generation: 1,
            tenant: Tenant::Global,
            hash_tag: false,
            criteria,
        }
    }

    pub fn builder(&self) -> KeyBuilder<'_> {
        self.builder_calling(&self.steps())
    }

    pub fn build(&self) -> Result<Key, KeyError> {
        self.builder().build()
    }

    pub fn canonical(&self) -> Canonical {
        Canonical {
            namespace: self.namespace.clone(),
            operation: self.operation.clone(),
            schema: self.schema,
            generation: self.generation,
            tenant: match &self.tenant {
                Tenant::Global => None,
                Tenant::Parts(parts) => Some(parts.iter().map(Part::model).collect()),
            },
            hash_tag: self.hash_tag,
            pairs: model_pairs(&self.criteria),
        }
    }
}

/// The criteria's (name, canonical value) pairs as the key holds them.
pub fn model_pairs(criteria: &[(String, Value)]) -> Vec<(String, String)> {
    pairs(
        criteria
            .iter()
            .map(|(name, value)| (name.clone(), value.model())),
    )
}

/// One method call of a `KeyBuilder` chain, for [`Input::builder_calling`].
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Schema,
    Generation,
    HashTag,
    /// The next tenant part, or `global()`.
    Tenant,
    /// The criterion at this index.
    Criterion(usize),
}

impl Input {
    /// Every call that makes this input's key, in the key format's order:
    /// the settings, the tenant parts (or `global`), the criteria.
    pub fn steps(&self) -> Vec<Step> {
        let tenant_calls = match &self.tenant {
            Tenant::Global => 1,
            Tenant::Parts(parts) => parts.len(),
        };
        let mut steps = vec![Step::Schema, Step::Generation, Step::HashTag];
        steps.extend(std::iter::repeat_n(Step::Tenant, tenant_calls));
        steps.extend((0..self.criteria.len()).map(Step::Criterion));
        steps
    }

    /// A builder given this input's parts, its methods called in the order
    /// of `steps` (tenant parts still in their order).
    pub fn builder_calling(&self, steps: &[Step]) -> KeyBuilder<'_> {
        let mut builder = KeyBuilder::new(self.namespace.as_str(), self.operation.as_str());
        let mut parts = match &self.tenant {
            Tenant::Global => [].iter(),
            Tenant::Parts(parts) => parts.iter(),
        };
        for step in steps {
            match *step {
                Step::Schema => {
                    builder.schema(self.schema);
                }
                Step::Generation => {
                    builder.generation(self.generation);
                }
                Step::HashTag => {
                    builder.hash_tag(self.hash_tag);
                }
                Step::Tenant => match (&self.tenant, parts.next()) {
                    (Tenant::Global, _) => {
                        builder.global();
                    }
                    (Tenant::Parts(_), Some(part)) => part.add_to(&mut builder),
                    (Tenant::Parts(_), None) => {}
                },
                Step::Criterion(i) => {
                    let (name, value) = &self.criteria[i];
                    value.add_to(&mut builder, name);
                }
            }
        }
        builder
    }
}
