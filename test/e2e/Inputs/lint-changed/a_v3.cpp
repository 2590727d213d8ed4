// A file whose first version predates the format check.
int   oldBad( int x ){return x;}

int added(int x) { return x + 1; }

int   newBad( int x ){
return x+2;}
