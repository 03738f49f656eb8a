//! Finds a non-finite number in a value before it is stored as JSON, which has no NaN or
//! infinity (`serde_json` would write `null`, which then fails to read back as a number).

use std::fmt;

use serde::ser::{self, Serialize};

/// Why a value cannot be stored: a non-finite number at `path`, or an error of the value's
/// own `Serialize` implementation.
#[derive(Debug)]
pub(crate) struct Unstorable {
    /// Field names and indices from the outside in, innermost last.
    path: Vec<String>,
    message: String,
}

impl Unstorable {
    fn non_finite(value: f64) -> Self {
        Self {
            path: Vec::new(),
            message: format!("holds {value}, which JSON cannot store"),
        }
    }

    fn within(mut self, segment: impl fmt::Display) -> Self {
        self.path.push(segment.to_string());
        self
    }
}

impl fmt::Display for Unstorable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "the value {}", self.message)
        } else {
            let mut path = String::new();
            for segment in self.path.iter().rev() {
                if !path.is_empty() && !segment.starts_with('[') {
                    path.push('.');
                }
                path.push_str(segment);
            }
            write!(f, "{path} {}", self.message)
        }
    }
}

impl std::error::Error for Unstorable {}

impl ser::Error for Unstorable {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self {
            path: Vec::new(),
            message: format!("cannot be serialized ({msg})"),
        }
    }
}

/// `Ok` when every floating-point number in `value` is finite.
pub(crate) fn check_finite<T: Serialize + ?Sized>(value: &T) -> Result<(), Unstorable> {
    value.serialize(Finite)
}

/// A serializer that stores nothing and fails on the first non-finite float.
struct Finite;

/// A compound value being checked; counts elements for the error path.
struct Compound {
    next: usize,
}

impl Compound {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        let index = self.next;
        self.next += 1;
        value
            .serialize(Finite)
            .map_err(|err| err.within(format!("[{index}]")))
    }
}

impl ser::Serializer for Finite {
    type Ok = ();
    type Error = Unstorable;
    type SerializeSeq = Compound;
    type SerializeTuple = Compound;
    type SerializeTupleStruct = Compound;
    type SerializeTupleVariant = Compound;
    type SerializeMap = Compound;
    type SerializeStruct = Compound;
    type SerializeStructVariant = Compound;

    fn serialize_bool(self, _: bool) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_f32(self, value: f32) -> Result<(), Unstorable> {
        self.serialize_f64(f64::from(value))
    }
    fn serialize_f64(self, value: f64) -> Result<(), Unstorable> {
        if value.is_finite() {
            Ok(())
        } else {
            Err(Unstorable::non_finite(value))
        }
    }
    fn serialize_char(self, _: char) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unstorable> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Unstorable> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unstorable> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unstorable> {
        value.serialize(self).map_err(|err| err.within(variant))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Compound, Unstorable> {
        Ok(Compound { next: 0 })
    }
}

impl ser::SerializeSeq for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeTuple for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeMap for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unstorable> {
        key.serialize(Finite).map_err(|err| err.within("<key>"))
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unstorable> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeStruct for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unstorable> {
        value.serialize(Finite).map_err(|err| err.within(key))
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound {
    type Ok = ();
    type Error = Unstorable;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unstorable> {
        value.serialize(Finite).map_err(|err| err.within(key))
    }
    fn end(self) -> Result<(), Unstorable> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::check_finite;

    #[derive(Serialize)]
    struct Fit {
        parameters: Vec<f64>,
        cost: Option<f32>,
        label: String,
    }

    #[test]
    fn finite_values_pass_and_the_first_non_finite_one_is_named() {
        let good = Fit {
            parameters: vec![1.0, -2.5e300],
            cost: Some(0.5),
            label: "ok".into(),
        };
        assert!(check_finite(&good).is_ok());
        let nan = Fit {
            parameters: vec![1.0, f64::NAN],
            ..good
        };
        assert_eq!(
            check_finite(&nan).unwrap_err().to_string(),
            "parameters[1] holds NaN, which JSON cannot store"
        );
        let inf = Fit {
            parameters: vec![],
            cost: Some(f32::NEG_INFINITY),
            label: String::new(),
        };
        assert_eq!(
            check_finite(&inf).unwrap_err().to_string(),
            "cost holds -inf, which JSON cannot store"
        );
        assert!(check_finite(&f64::INFINITY).is_err());
        let map: BTreeMap<&str, (u8, f64)> = [("a", (1, f64::NAN))].into();
        assert_eq!(
            check_finite(&map).unwrap_err().to_string(),
            "[0][1] holds NaN, which JSON cannot store"
        );
    }
}
