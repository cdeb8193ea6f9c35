"""What more than one test folder uses: the fleet builders and moto's gaps (`fleet`), the
engine's walks (`walks`), the detection's events and signals (`factory`, from the JSON in
`fixtures/`), the reconciler's fakes (`fakes`) and its harness of controllers sharing one
ledger (`harness`). A helper only one folder uses stays in that folder."""
