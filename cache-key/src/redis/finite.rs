//! Finds the floats JSON cannot hold: `serde_json` writes NaN and the
//! infinities as `null`, which reads back as another value (or not at all),
//! so an entry holding one would miss on every read while every load wrote
//! it again. [`check`] walks a value as a serializer that writes nothing:
//! once without paths (what every store pays), and again, writing the path,
//! only when it found such a float.

use std::fmt::{self, Display, Write as _};

use serde::ser::{self, Serialize};

/// Where a value holds a NaN or an infinite float, as a path into it
/// (`books[2].price`, `.0`, `["key"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NonFinite {
    pub(crate) path: String,
    pub(crate) value: String,
}

impl Display for NonFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "the value"
        } else {
            &self.path
        };
        write!(
            f,
            "{at} is {}, which JSON cannot hold (serde_json writes it as null, \
             so the entry would never read back as this value)",
            self.value
        )
    }
}

impl std::error::Error for NonFinite {}

/// `Ok` when no float in `value` is NaN or infinite.
pub(crate) fn check<T: Serialize + ?Sized>(value: &T) -> Result<(), NonFinite> {
    match value.serialize(Walk { path: None }) {
        Ok(()) => Ok(()),
        Err(Stop::NonFinite(_)) => {
            let mut path = String::new();
            match value.serialize(Walk {
                path: Some(&mut path),
            }) {
                Err(Stop::NonFinite(found)) => Err(found),
                // A value whose floats change between two walks: found once.
                Ok(()) | Err(Stop::Custom) => Err(NonFinite {
                    path: String::new(),
                    value: "not finite".to_owned(),
                }),
            }
        }
        // A value serde cannot serialize at all: serde_json reports it next.
        Err(Stop::Custom) => Ok(()),
    }
}

#[derive(Debug)]
enum Stop {
    NonFinite(NonFinite),
    Custom,
}

impl Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::NonFinite(found) => found.fmt(f),
            Stop::Custom => f.write_str("the value does not serialize"),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<M: Display>(_: M) -> Self {
        Stop::Custom
    }
}

/// A serializer that writes nothing and stops at the first non-finite float,
/// keeping the path to where it is when given one.
struct Walk<'p> {
    path: Option<&'p mut String>,
}

impl Walk<'_> {
    fn float(self, value: f64) -> Result<(), Stop> {
        if value.is_finite() {
            return Ok(());
        }
        Err(Stop::NonFinite(NonFinite {
            path: self.path.map(|path| path.clone()).unwrap_or_default(),
            value: value.to_string(),
        }))
    }

    /// Walks `value` with `segment` appended to the path.
    fn at<T: Serialize + ?Sized>(&mut self, segment: impl Display, value: &T) -> Result<(), Stop> {
        let Some(path) = self.path.as_deref_mut() else {
            return value.serialize(Walk { path: None });
        };
        let len = path.len();
        let _ = write!(path, "{segment}");
        let walked = value.serialize(Walk {
            path: Some(&mut *path),
        });
        path.truncate(len);
        walked
    }

    /// Appends `.variant` to the path, for the fields that follow.
    fn variant(&mut self, variant: &'static str) {
        if let Some(path) = self.path.as_deref_mut() {
            path.push('.');
            path.push_str(variant);
        }
    }
}

/// Walks the elements of a sequence, a tuple or a map, counting them.
struct Elements<'p> {
    walk: Walk<'p>,
    index: usize,
}

impl Elements<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        let index = self.index;
        self.index += 1;
        self.walk.at(format_args!("[{index}]"), value)
    }
}

/// Methods of values that hold no float: nothing to look at.
macro_rules! ignore {
    ($($method:ident($($ty:ty),*);)*) => {
        $(fn $method(self, $(_: $ty),*) -> Result<(), Stop> { Ok(()) })*
    };
}

impl<'p> ser::Serializer for Walk<'p> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Elements<'p>;
    type SerializeTuple = Elements<'p>;
    type SerializeTupleStruct = Elements<'p>;
    type SerializeTupleVariant = Elements<'p>;
    type SerializeMap = Elements<'p>;
    type SerializeStruct = Walk<'p>;
    type SerializeStructVariant = Walk<'p>;

    ignore! {
        serialize_bool(bool);
        serialize_i8(i8); serialize_i16(i16); serialize_i32(i32); serialize_i64(i64); serialize_i128(i128);
        serialize_u8(u8); serialize_u16(u16); serialize_u32(u32); serialize_u64(u64); serialize_u128(u128);
        serialize_char(char); serialize_str(&str); serialize_bytes(&[u8]);
        serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_f32(self, value: f32) -> Result<(), Stop> {
        self.float(f64::from(value))
    }

    fn serialize_f64(self, value: f64) -> Result<(), Stop> {
        self.float(value)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        self.at(format_args!(".{variant}"), value)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Elements<'p>, Stop> {
        Ok(Elements {
            walk: self,
            index: 0,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Elements<'p>, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Elements<'p>, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Elements<'p>, Stop> {
        self.variant(variant);
        self.serialize_seq(Some(len))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Elements<'p>, Stop> {
        self.serialize_seq(len)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Walk<'p>, Stop> {
        Ok(self)
    }

    fn serialize_struct_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Walk<'p>, Stop> {
        self.variant(variant);
        Ok(self)
    }
}

/// The sequence-like serializers: each element in turn, by position.
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Elements<'_> {
            type Ok = ();
            type Error = Stop;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
                self.element(value)
            }

            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// A map's keys are walked for floats too (serde_json refuses a float key
/// anyway); its values are named by their position, keys not being text.
impl ser::SerializeMap for Elements<'_> {
    type Ok = ();
    type Error = Stop;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        key.serialize(Walk {
            path: self.walk.path.as_deref_mut(),
        })
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.element(value)
    }

    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// The struct-like serializers: each field in turn, by name.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Walk<'_> {
            type Ok = ();
            type Error = Stop;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), Stop> {
                self.at(format_args!(".{name}"), value)
            }

            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(serde::Serialize)]
    struct Book {
        title: &'static str,
        price: Option<f64>,
        ratings: Vec<f32>,
    }

    #[test]
    fn the_first_non_finite_float_is_found_with_its_path() {
        let books = vec![
            Book {
                title: "Dune",
                price: Some(9.5),
                ratings: vec![4.0, 5.0],
            },
            Book {
                title: "Sand",
                price: Some(f64::NAN),
                ratings: vec![],
            },
        ];
        let found = check(&books).unwrap_err();
        assert_eq!(found.path, "[1].price");
        assert_eq!(found.value, "NaN");
        assert!(found.to_string().contains("serde_json writes it as null"));

        let infinite = Book {
            title: "x",
            price: None,
            ratings: vec![1.0, f32::INFINITY],
        };
        assert_eq!(check(&infinite).unwrap_err().path, ".ratings[1]");
        assert_eq!(check(&f64::NEG_INFINITY).unwrap_err().path, "");
        let map = BTreeMap::from([("a", 1.0), ("b", f64::NAN)]);
        assert_eq!(check(&map).unwrap_err().path, "[1]");
    }

    #[test]
    fn finite_values_pass() {
        let books = vec![Book {
            title: "Dune",
            price: Some(-0.0),
            ratings: vec![f32::MIN_POSITIVE, f32::MAX],
        }];
        assert_eq!(check(&books), Ok(()));
        assert_eq!(check(&(1u8, "two", [3.0f64; 2], ())), Ok(()));
    }
}
