//! Per-update Write errors (P4Runtime §12.3): a failed batch answers with
//! one `p4.v1.Error` per update, packed as `Any` in the details of a
//! `google.rpc.Status` carried in the `grpc-status-details-bin` trailer.

use prost::Message;
use tonic::Code;

use crate::proto::google::rpc::Status as RpcStatus;
use crate::proto::p4::v1 as p4;

const ERROR_TYPE_URL: &str = "type.googleapis.com/p4.v1.Error";

/// One update of a batch that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateFailure {
    /// Position of the update in the batch sent.
    pub index: usize,
    pub code: Code,
    pub message: String,
}

/// A Write the server refused in whole or in part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} of {batch_len} updates failed{}", failures.len(), first(failures))]
pub struct WriteFailure {
    pub batch_len: usize,
    /// The overall gRPC status code and message.
    pub code: Code,
    pub message: String,
    /// The failed updates, in batch order; empty if the server gave no
    /// details (then the whole batch is to be taken as failed).
    pub failures: Vec<UpdateFailure>,
}

fn first(f: &[UpdateFailure]) -> String {
    f.first().map(|u| format!(" (first: #{} {:?}: {})", u.index, u.code, u.message)).unwrap_or_default()
}

impl WriteFailure {
    /// Decodes the details of a failed Write's status.
    pub fn from_status(status: &tonic::Status, batch_len: usize) -> Self {
        let mut failures = Vec::new();
        if let Ok(rpc) = RpcStatus::decode(status.details()) {
            for (index, any) in rpc.details.iter().enumerate() {
                let Ok(err) = p4::Error::decode(any.value.as_slice()) else { continue };
                if err.canonical_code != Code::Ok as i32 {
                    failures.push(UpdateFailure {
                        index,
                        code: Code::from_i32(err.canonical_code),
                        message: err.message,
                    });
                }
            }
        }
        WriteFailure { batch_len, code: status.code(), message: status.message().to_owned(), failures }
    }

    /// True if every failure has `code` (and there is at least one).
    pub fn only(&self, code: Code) -> bool {
        !self.failures.is_empty() && self.failures.iter().all(|f| f.code == code)
    }

    /// Every failure is ALREADY_EXISTS: an idempotent insert.
    pub fn only_already_exists(&self) -> bool {
        self.only(Code::AlreadyExists)
    }

    /// Every failure is NOT_FOUND: an idempotent delete.
    pub fn only_not_found(&self) -> bool {
        self.only(Code::NotFound)
    }

    /// Positions of the failed updates.
    pub fn failed_indexes(&self) -> Vec<usize> {
        self.failures.iter().map(|f| f.index).collect()
    }
}

/// Builds the status a server returns for a batch with per-update results.
/// `None` when every update succeeded.
pub fn batch_status(results: &[Result<(), tonic::Status>]) -> Option<tonic::Status> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return None;
    }
    let details = results
        .iter()
        .map(|r| {
            let e = match r {
                Ok(()) => p4::Error { canonical_code: Code::Ok as i32, ..Default::default() },
                Err(s) => p4::Error {
                    canonical_code: s.code() as i32,
                    message: s.message().to_owned(),
                    ..Default::default()
                },
            };
            prost_types::Any { type_url: ERROR_TYPE_URL.into(), value: e.encode_to_vec() }
        })
        .collect();
    let message = format!("{failed} of {} updates failed", results.len());
    let rpc = RpcStatus { code: Code::Unknown as i32, message: message.clone(), details };
    Some(tonic::Status::with_details(Code::Unknown, message, rpc.encode_to_vec().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_partial_failure() {
        let results = vec![
            Ok(()),
            Err(tonic::Status::already_exists("entry exists")),
            Ok(()),
            Err(tonic::Status::not_found("no member 7")),
        ];
        let status = batch_status(&results).unwrap();
        let w = WriteFailure::from_status(&status, 4);
        assert_eq!(w.failed_indexes(), vec![1, 3]);
        assert_eq!(w.failures[0].code, Code::AlreadyExists);
        assert_eq!(w.failures[1].message, "no member 7");
        assert!(!w.only_already_exists());
        assert!(!w.only_not_found());
        assert!(w.to_string().starts_with("2 of 4 updates failed"));
    }

    #[test]
    fn only_helpers() {
        let status = batch_status(&[Err(tonic::Status::not_found("x")), Ok(())]).unwrap();
        let w = WriteFailure::from_status(&status, 2);
        assert!(w.only_not_found());
        assert!(batch_status(&[Ok(())]).is_none());
        // No details at all: not "only" anything.
        let bare = WriteFailure::from_status(&tonic::Status::internal("boom"), 3);
        assert!(bare.failures.is_empty() && !bare.only_not_found());
    }
}
