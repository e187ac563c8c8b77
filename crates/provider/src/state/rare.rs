//! Fields most objects leave empty (a charge's customer, an intent's texts, a refund's
//! charge in the ledger), kept in one box that exists only while one of them is set: a
//! plain object carries 8 bytes for all of them instead of their room.

/// `fields` boxed, or `None` when every one is empty (its `Default`).
pub fn boxed<T: Default + PartialEq>(fields: T) -> Option<Box<T>> {
    (fields != T::default()).then(|| Box::new(fields))
}

/// Changes the fields in `slot` with `f`: the box is made when one is set, and dropped
/// when all are empty again.
pub fn change<T: Default + PartialEq>(slot: &mut Option<Box<T>>, f: impl FnOnce(&mut T)) {
    let mut fields = slot.take().map(|b| *b).unwrap_or_default();
    f(&mut fields);
    *slot = boxed(fields);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq)]
    struct Fields {
        a: Option<u8>,
        b: Option<u8>,
    }

    #[test]
    fn the_box_lives_while_a_field_is_set() {
        assert_eq!(boxed(Fields::default()), None);
        let mut slot = None;
        change(&mut slot, |f: &mut Fields| f.a = Some(1));
        change(&mut slot, |f| f.b = Some(2));
        assert_eq!(slot.as_deref(), Some(&Fields { a: Some(1), b: Some(2) }));
        change(&mut slot, |f| *f = Fields::default());
        assert!(slot.is_none(), "emptied: the box is gone");
    }
}
